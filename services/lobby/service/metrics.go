package service

import (
	"context"
	"strings"
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	lobbyv1 "github.com/vigil-dev/vigil/pkg/api/vigil/lobby/v1"
)

// Occupancy updates, for operators: how many deltas the lobby applied, found stale or refused
// for a resync, and how many snapshots it applied. A steady stream of resyncs means rooms lose
// deltas on their way here.

var (
	occupancyUpdates = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "vigil_lobby_occupancy_updates_total",
		Help: "Occupancy updates from rooms by kind (delta, snapshot) and result (applied, stale, resync).",
	}, []string{"kind", "result"})
	registerMetrics sync.Once
)

// countedLobby counts the outcomes of the occupancy calls of the LobbyService it wraps.
type countedLobby struct {
	lobbyv1.LobbyServiceServer
}

func countOccupancy(s lobbyv1.LobbyServiceServer) lobbyv1.LobbyServiceServer {
	registerMetrics.Do(func() { prometheus.MustRegister(occupancyUpdates) })
	return countedLobby{s}
}

// ApplyOccupancyDelta implements lobbyv1.LobbyServiceServer.
func (c countedLobby) ApplyOccupancyDelta(ctx context.Context, req *lobbyv1.ApplyOccupancyDeltaRequest) (*lobbyv1.ApplyOccupancyDeltaResponse, error) {
	res, err := c.LobbyServiceServer.ApplyOccupancyDelta(ctx, req)
	if err == nil {
		result := strings.ToLower(strings.TrimPrefix(res.GetOutcome().String(), "DELTA_OUTCOME_"))
		occupancyUpdates.WithLabelValues("delta", result).Inc()
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
		occupancyUpdates.WithLabelValues("snapshot", result).Inc()
	}
	return res, err
}
