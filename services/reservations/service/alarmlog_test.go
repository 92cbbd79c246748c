package service

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	reservationsv1 "github.com/vigil-dev/vigil/pkg/api/vigil/reservations/v1"
	"github.com/vigil-dev/vigil/pkg/clock/clocktest"
	"github.com/vigil-dev/vigil/pkg/server/servertest"
	"github.com/vigil-dev/vigil/pkg/wait"
)

// TestAlarmLogLines lets a hold expire through the scheduler and reads the reservation-alarm
// lines the service wrote: a start line and a done line, each opening with the seed lab's exact
// {"event":"reservation-alarm","isRetry":false,"retryCount":0, and carrying the id, whether the
// state changed (done only) and the delay from the due time on the service's clock.
func TestAlarmLogLines(t *testing.T) {
	t.Parallel()
	t0 := time.UnixMilli(1_900_000_000_000)
	clk := clocktest.New(t0)
	var log servertest.LogBuffer
	core := testCore(t)
	core.Now = clk.Now
	addr := start(t, Options{Core: core, AlarmLog: &log})
	rs := client(t, addr)
	ctx := context.Background()
	if _, err := rs.CreateReservation(ctx, &reservationsv1.CreateReservationRequest{ReservationId: "seat-12a", TtlSeconds: 5}); err != nil {
		t.Fatal(err)
	}
	clk.Set(t0.Add(5*time.Second + 7*time.Millisecond)) // the handler runs 7 ms after the due time
	wait.Until(t, "the done line", func() bool { return strings.Contains(strings.Join(log.Lines(), "\n"), `"phase":"done"`) })

	got := log.Lines()
	if len(got) != 2 {
		t.Fatalf("alarm lines = %q, want a start and a done line", got)
	}
	const opening = `{"event":"reservation-alarm","isRetry":false,"retryCount":0,`
	want := []map[string]any{
		{"event": "reservation-alarm", "isRetry": false, "retryCount": 0.0, "phase": "start", "id": "seat-12a", "delayMs": 7.0},
		{"event": "reservation-alarm", "isRetry": false, "retryCount": 0.0, "phase": "done", "id": "seat-12a", "delayMs": 7.0, "changed": true},
	}
	for i, line := range got {
		if !strings.HasPrefix(line, opening) {
			t.Errorf("line %d = %s, want it to open with %s", i, line, opening)
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("line %d is not JSON: %s", i, line)
		}
		if _, err := time.Parse(time.RFC3339Nano, m["time"].(string)); err != nil {
			t.Errorf("line %d time = %v: %v", i, m["time"], err)
		}
		delete(m, "time")
		if len(m) != len(want[i]) {
			t.Errorf("line %d = %v, want exactly %v plus time", i, m, want[i])
		}
		for k, v := range want[i] {
			if m[k] != v {
				t.Errorf("line %d %s = %v, want %v (%s)", i, k, m[k], v, line)
			}
		}
	}
}

// TestReplayRefusesUnsafeTimes sends replay times a JSON number cannot carry exactly, or that
// the script's guard refuses, straight to the service: InvalidArgument with the input rule's
// sentence, never Unavailable, and nothing stored.
func TestReplayRefusesUnsafeTimes(t *testing.T) {
	t.Parallel()
	rs := client(t, start(t, Options{Core: testCore(t), Replay: true}))
	ctx := context.Background()
	if _, err := rs.CreateReservation(ctx, &reservationsv1.CreateReservationRequest{ReservationId: "seat-1", TtlSeconds: 5}); err != nil {
		t.Fatal(err)
	}
	for _, now := range []int64{1e17, 1<<53 + 1, 0, -1} {
		_, err := rs.ReplayAlarm(ctx, &reservationsv1.ReplayAlarmRequest{ReservationId: "seat-1", Now: now})
		if status.Code(err) != codes.InvalidArgument || status.Convert(err).Message() != "now must be an integer from 1 through 9007199254740991." {
			t.Errorf("ReplayAlarm(now=%d) = %v, want InvalidArgument with the input rule's sentence", now, err)
		}
	}
	r, err := rs.GetReservation(ctx, &reservationsv1.GetReservationRequest{ReservationId: "seat-1"})
	if err != nil || r.GetReservation().GetStatus() != "held" {
		t.Fatalf("after refused replays GetReservation = %v, %v; want held", r, err)
	}
	// The largest safe time is accepted and stored exactly.
	const maxSafe = 1<<53 - 1
	res, err := rs.ReplayAlarm(ctx, &reservationsv1.ReplayAlarmRequest{ReservationId: "seat-1", Now: maxSafe})
	if err != nil || !res.GetChanged() || res.GetExpiredAt() != maxSafe {
		t.Fatalf("ReplayAlarm(now=2^53-1) = %v, %v; want changed, expiredAt %d", res, err, int64(maxSafe))
	}
	res, err = rs.ReplayAlarm(ctx, &reservationsv1.ReplayAlarmRequest{ReservationId: "seat-1", Now: maxSafe})
	if err != nil || res.GetChanged() || res.GetExpirationCount() != 1 {
		t.Fatalf("second ReplayAlarm = %v, %v; want unchanged, expired once", res, err)
	}
}

// TestMetricsOnTheRegistererGiven starts the service on a registry of its own: the Redis script,
// alarm and gRPC metrics land there, so two services in one process never collide.
func TestMetricsOnTheRegistererGiven(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	core := testCore(t)
	core.Registerer = reg
	rs := client(t, start(t, Options{Core: core}))
	if _, err := rs.CreateReservation(context.Background(), &reservationsv1.CreateReservationRequest{ReservationId: "seat-1", TtlSeconds: 5}); err != nil {
		t.Fatal(err)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	have := map[string]bool{}
	for _, mf := range mfs {
		have[mf.GetName()] = true
	}
	for _, name := range []string{"vigil_redis_script_duration_seconds", "vigil_alarms_claimed_total", "grpc_server_handled_total"} {
		if !have[name] {
			t.Errorf("%s is not on the service's registry (%v)", name, have)
		}
	}
}
