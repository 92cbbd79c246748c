package app

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/vigil-dev/vigil/pkg/alarm"
	"github.com/vigil-dev/vigil/pkg/redistest"
	"github.com/vigil-dev/vigil/services/reservations/internal/store"
)

func TestMain(m *testing.M) { redistest.Main(m) }

func newApp(t *testing.T, now time.Time, log *bytes.Buffer) *App {
	t.Helper()
	rdb, prefix := redistest.Universal(t)
	q, err := alarm.New(rdb, alarm.Options{Prefix: prefix, Namespace: "reservations", Shards: 1})
	if err != nil {
		t.Fatal(err)
	}
	st, err := store.New(rdb, store.Options{Queue: q})
	if err != nil {
		t.Fatal(err)
	}
	return New(st, Options{Now: func() time.Time { return now }, AlarmLog: log})
}

func parseLines(t *testing.T, b *bytes.Buffer) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(b.String()), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("not a JSON line: %q", line)
		}
		out = append(out, m)
	}
	return out
}

// TestHandleAlarmsLogsRetriesAndFailures hands the handler a retried firing (the log says so),
// then a batch whose transition cannot run (its context is gone): every firing gets a failed
// line with the error, and an error for the queue to retry it.
func TestHandleAlarmsLogsRetriesAndFailures(t *testing.T) {
	t.Parallel()
	t0 := time.UnixMilli(1_900_000_000_000)
	var log bytes.Buffer
	a := newApp(t, t0, &log)
	ctx := context.Background()
	if _, err := a.store.Create(ctx, "seat-1", t0.Add(-10*time.Second), 5*time.Second); err != nil {
		t.Fatal(err)
	}
	due := t0.Add(-5 * time.Second)
	retried := []alarm.Firing{{ID: "seat-1", Attempt: 3, Due: due}, {ID: "never-made", Attempt: 1, Due: due}}
	if errs := a.HandleAlarms(ctx, retried); errs != nil {
		t.Fatalf("HandleAlarms = %v, want no errors", errs)
	}
	got := parseLines(t, &log)
	if len(got) != 4 {
		t.Fatalf("%d lines, want a start and a done line per firing: %v", len(got), got)
	}
	done := got[2]
	if done["phase"] != "done" || done["id"] != "seat-1" || done["isRetry"] != true || done["retryCount"] != 2.0 || done["changed"] != true || done["delayMs"] != 5000.0 {
		t.Errorf("done line of the retried firing = %v, want isRetry, retryCount 2, changed, delayMs 5000", done)
	}
	if missing := got[3]; missing["changed"] != false || missing["id"] != "never-made" {
		t.Errorf("done line of a missing reservation = %v, want changed false", missing)
	}

	log.Reset()
	gone, cancel := context.WithCancel(ctx)
	cancel()
	batch := []alarm.Firing{{ID: "seat-2", Attempt: 1, Due: due}, {ID: "seat-3", Attempt: 1, Due: due}}
	errs := a.HandleAlarms(gone, batch)
	if len(errs) != 2 || errs[0] == nil || errs[1] == nil {
		t.Fatalf("HandleAlarms with its context gone = %v, want an error per firing", errs)
	}
	got = parseLines(t, &log)
	if len(got) != 4 {
		t.Fatalf("%d lines, want a start and a failed line per firing: %v", len(got), got)
	}
	for _, m := range got[2:] {
		if m["phase"] != "failed" || m["changed"] != false || m["error"] == "" || m["error"] == nil {
			t.Errorf("failed line = %v, want phase failed, changed false and the error", m)
		}
	}
}
