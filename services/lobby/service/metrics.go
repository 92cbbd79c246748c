package service

import (
	"context"
	"strings"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/vigil-dev/vigil/pkg/prom"

	lobbyv1 "github.com/vigil-dev/vigil/pkg/api/vigil/lobby/v1"
)

// Occupancy updates, for operators: how many deltas the lobby applied, found stale or refused
// for a resync, and how many snapshots it applied. A steady stream of resyncs means rooms lose
// deltas on their way here.

// occupancyMetric registers the counter on reg; a second Lobby in one process (vigil dev and
// the tests run several) shares the one already registered there.
func occupancyMetric(reg prometheus.Registerer) (*prometheus.CounterVec, error) {
	c := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "vigil_lobby_occupancy_updates_total",
		Help: "Occupancy updates from rooms by kind (delta, snapshot) and result (applied, stale, resync).",
	}, []string{"kind", "result"})
	return prom.Register(reg, c)
}

// countedLobby counts the outcomes of the occupancy calls of the LobbyService it wraps.
type countedLobby struct {
	lobbyv1.LobbyServiceServer
	updates *prometheus.CounterVec
}

func countOccupancy(s lobbyv1.LobbyServiceServer, updates *prometheus.CounterVec) lobbyv1.LobbyServiceServer {
	return countedLobby{s, updates}
}

// ApplyOccupancyDelta implements lobbyv1.LobbyServiceServer.
func (c countedLobby) ApplyOccupancyDelta(ctx context.Context, req *lobbyv1.ApplyOccupancyDeltaRequest) (*lobbyv1.ApplyOccupancyDeltaResponse, error) {
	res, err := c.LobbyServiceServer.ApplyOccupancyDelta(ctx, req)
	if err == nil {
		result := strings.ToLower(strings.TrimPrefix(res.GetOutcome().String(), "DELTA_OUTCOME_"))
		c.updates.WithLabelValues("delta", result).Inc()
	}
	return res, err
}

// ApplyOccupancySnapshot implements lobbyv1.LobbyServiceServer.
func (c countedLobby) ApplyOccupancySnapshot(ctx context.Context, req *lobbyv1.ApplyOccupancySnapshotRequest) (*lobbyv1.ApplyOccupancySnapshotResponse, error) {
	res, err := c.LobbyServiceServer.ApplyOccupancySnapshot(ctx, req)
	if err == nil {
		result := "stale"
		if res.GetApplied() {
			result = "applied"
		}
		c.updates.WithLabelValues("snapshot", result).Inc()
	}
	return res, err
}
