package main

import (
	"bytes"
	"fmt"
	"testing"
	"time"

	"github.com/vigil-dev/vigil/pkg/wait"
)

// A gctrace line's live heap (C of A->B->C MB) is kept; every other line is passed on.
func TestGCTraceReadsTheLiveHeap(t *testing.T) {
	var out bytes.Buffer
	g := newGCTrace(&out)
	for _, line := range []string{
		"gc 1 @0.012s 2%: 0.010+1.2+0.003 ms clock, 0.020+0.1/0.9/0.5+0.007 ms cpu, 4->4->1 MB, 4 MB goal, 0 MB stacks, 0 MB globals, 2 P",
		"time=2026-12-05T12:00:00Z level=WARN msg=\"something\"",
		"gc 2 @1.500s 1%: 0.011+2.0+0.004 ms clock, 0.022+0.2/1.1/0.4+0.008 ms cpu, 7->8->3 MB, 8 MB goal, 0 MB stacks, 0 MB globals, 2 P",
	} {
		if _, err := fmt.Fprintln(g, line); err != nil {
			t.Fatal(err)
		}
	}
	wait.Until(t, "both collections read", func() bool { return g.count() == 2 })
	if got := g.lastLive(); got != "3" {
		t.Errorf("lastLive() = %q, want 3 (MB marked live by the second collection)", got)
	}
	if got := g.medianLive(time.Now().Add(-time.Minute), time.Now()); got != 3 {
		t.Errorf("medianLive of 1 and 3 MB = %v, want 3 (the upper median)", got)
	}
	wait.Until(t, "the log line passed on", func() bool { return bytes.Contains(out.Bytes(), []byte("level=WARN")) })
	if bytes.Contains(out.Bytes(), []byte("gc 1 @")) {
		t.Errorf("a gctrace line was passed on: %q", out.String())
	}
}
