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
// The store nemesis (store_test.go, store_nemesis_test.go, store_held_test.go) breaks the
// store instead: a primary, two replicas and three sentinels in containers on a docker network
// of the test's own, every node reached through a proxy of the test's that tells the services',
// the replicas' and the sentinels' connections apart, under the same load and checkers. The
// primary is SIGKILLed with its replication link held, paused past the failover, cut off
// alone, or restarted at once, once under async durability (the loss must show) and once under
// replica (nothing may be lost, doubled or early; fencing tokens increase across the whole run;
// the Lobby's count of each room exact after healing). The rooms' load there is joiners coming
// and going beside the viewers, the room service and its Lobby both on the faulted store.
// TestSingleRedisRestart (store_single_test.go) SIGKILLs one Redis with no replica and starts it
// at once on its files, under appendfsync everysec (async) and under fsync durability.
//
// The tests carry the build tag nemesis: `make test-nemesis` runs them (go test -tags nemesis
// ./deploy/nemesis).
package nemesis
