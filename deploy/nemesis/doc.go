// Package nemesis is Vigil's suite of failures that close nothing: two replicas of each domain
// service under steady load while one of them is paused (SIGSTOP), partitioned (its network
// held: nothing arrives, nothing closes), run with its clock 30s ahead, or SIGKILLed. A history
// checker per domain says what the fault cost: locks (no two holds at once, fencing tokens in
// real-time order, no hold cut short), reservations (each hold expires exactly once, never
// before its expiresAt), chat (no gap, no duplicate, no acknowledged post lost per room). It
// prints one table: fault × domain × operations, lost, doubled, early, longest time unavailable.
//
// The replicas are this test binary started again as child processes (so a fault can stop or
// kill one without touching the test), each behind a TCP proxy of the test's own on loopback,
// for its clients and for its Redis: the proxy that holds traffic is the partition.
//
// The tests carry the build tag nemesis: `make test-nemesis` runs them (go test -tags nemesis
// ./deploy/nemesis).
package nemesis
