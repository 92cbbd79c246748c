package wait

import (
	"errors"
	"sync/atomic"
	"testing"
	"time"
)

func TestUntilReturnsOnceTheConditionHolds(t *testing.T) {
	var calls atomic.Int32
	Until(t, "the third call", func() bool { return calls.Add(1) >= 3 })
	if got := calls.Load(); got != 3 {
		t.Errorf("condition called %d times, want 3", got)
	}
}

// recorder is a testing.TB that records a Fatalf instead of stopping the test.
type recorder struct {
	testing.TB
	failed string
}

func (r *recorder) Helper() {}
func (r *recorder) Fatalf(format string, args ...any) {
	r.failed = format
	panic(r)
}

func TestWithinFailsWithTheLastError(t *testing.T) {
	r := &recorder{TB: t}
	func() {
		defer func() {
			if p := recover(); p != r {
				t.Fatalf("Within did not fail the test (recovered %v)", p)
			}
		}()
		Within(r, 20*time.Millisecond, "never", func() error { return errors.New("still broken") })
	}()
	if r.failed == "" {
		t.Error("Within returned without failing")
	}
}
