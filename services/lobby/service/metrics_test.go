package service_test

import (
	"context"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	lobbyv1 "github.com/vigil-dev/vigil/pkg/api/vigil/lobby/v1"
	"github.com/vigil-dev/vigil/pkg/prom/promtest"
)

// counterValue is the value of the first series of the counter name in the default registry
// that carries labels, or 0 when there is none yet.
func counterValue(t *testing.T, name string, labels map[string]string) float64 {
	t.Helper()
	for _, m := range promtest.Series(t, prometheus.DefaultGatherer, name, labels) {
		return m.GetCounter().GetValue()
	}
	return 0
}

// TestOccupancyUpdatesAreCounted checks vigil_lobby_occupancy_updates_total: a delta that skips
// a sequence number counts as a resync, the snapshot that follows and the next delta as applied.
func TestOccupancyUpdatesAreCounted(t *testing.T) {
	t.Parallel()
	c, _ := start(t)
	ctx := context.Background()
	room, err := c.CreateRoom(ctx, &lobbyv1.CreateRoomRequest{Name: "Counted", Video: &lobbyv1.Video{Title: "v", DurationMs: 1000}})
	if err != nil {
		t.Fatal(err)
	}
	code := room.GetCode()
	resync := map[string]string{"kind": "delta", "result": "resync"}
	applied := map[string]string{"kind": "delta", "result": "applied"}
	snap := map[string]string{"kind": "snapshot", "result": "applied"}
	r0, a0, s0 := counterValue(t, "vigil_lobby_occupancy_updates_total", resync), counterValue(t, "vigil_lobby_occupancy_updates_total", applied), counterValue(t, "vigil_lobby_occupancy_updates_total", snap)

	if res, err := c.ApplyOccupancyDelta(ctx, &lobbyv1.ApplyOccupancyDeltaRequest{Code: code, Seq: 5, ViewersDelta: 1}); err != nil || res.GetOutcome() != lobbyv1.DeltaOutcome_DELTA_OUTCOME_RESYNC {
		t.Fatalf("delta with seq 5 = %v, %v; want resync", res, err)
	}
	if _, err := c.ApplyOccupancySnapshot(ctx, &lobbyv1.ApplyOccupancySnapshotRequest{Code: code, Seq: 5, Viewers: 1}); err != nil {
		t.Fatal(err)
	}
	if res, err := c.ApplyOccupancyDelta(ctx, &lobbyv1.ApplyOccupancyDeltaRequest{Code: code, Seq: 6, ViewersDelta: 1}); err != nil || res.GetOutcome() != lobbyv1.DeltaOutcome_DELTA_OUTCOME_APPLIED {
		t.Fatalf("delta with seq 6 = %v, %v; want applied", res, err)
	}
	for _, c := range []struct {
		labels map[string]string
		before float64
	}{{resync, r0}, {applied, a0}, {snap, s0}} {
		if got := counterValue(t, "vigil_lobby_occupancy_updates_total", c.labels); got < c.before+1 {
			t.Errorf("vigil_lobby_occupancy_updates_total%v = %v, want at least %v", c.labels, got, c.before+1)
		}
	}
}
