// Package wait is the one way Vigil's tests wait for something: poll a condition until it holds,
// and fail the test with what was awaited (and the condition's last error) once a generous
// deadline passes. The deadline only bounds a broken test; it is never how a test measures time
// (timing is driven by the services' injected clocks).
package wait

import (
	"fmt"
	"testing"
	"time"
)

// Deadline is how long For and Until wait before failing the test: long, so a busy 2-core
// machine never turns a slow pass into a failure.
const Deadline = 30 * time.Second

// poll is how often the condition is checked.
const poll = 5 * time.Millisecond

// For polls cond until it returns nil, failing t with what and cond's last error after Deadline.
func For(t testing.TB, what string, cond func() error) {
	t.Helper()
	Within(t, Deadline, what, cond)
}

// Until polls cond until it is true, failing t with what after Deadline.
func Until(t testing.TB, what string, cond func() bool) {
	t.Helper()
	Within(t, Deadline, what, func() error {
		if cond() {
			return nil
		}
		return fmt.Errorf("not yet")
	})
}

// Within is For with another deadline, for a condition that may take longer than Deadline (a
// container restart, a cluster failover).
func Within(t testing.TB, d time.Duration, what string, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(d)
	tick := time.NewTicker(poll)
	defer tick.Stop()
	for {
		err := cond()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("waited %v for %s: %v", d, what, err)
		}
		<-tick.C
	}
}
