package lobbylink

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"sync"
	"testing"

	"google.golang.org/grpc"

	lobbyv1 "github.com/vigil-dev/vigil/pkg/api/vigil/lobby/v1"
	"github.com/vigil-dev/vigil/pkg/wait"
	"github.com/vigil-dev/vigil/services/room/internal/domain"
)

// seqLobby applies a room's deltas only in sequence, as the Lobby does (anything else is a
// RESYNC), records every call, and holds the first delta until release is closed.
type seqLobby struct {
	lobbyv1.LobbyServiceClient
	release chan struct{}

	mu    sync.Mutex
	last  int64
	calls []string
}

func (f *seqLobby) record(c string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, c)
	return len(f.calls)
}

func (f *seqLobby) seen() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.calls)
}

func (f *seqLobby) ApplyOccupancyDelta(_ context.Context, r *lobbyv1.ApplyOccupancyDeltaRequest, _ ...grpc.CallOption) (*lobbyv1.ApplyOccupancyDeltaResponse, error) {
	if f.record(fmt.Sprintf("delta %d", r.GetSeq())) == 1 {
		<-f.release
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if r.GetSeq() != f.last+1 {
		return &lobbyv1.ApplyOccupancyDeltaResponse{Outcome: lobbyv1.DeltaOutcome_DELTA_OUTCOME_RESYNC}, nil
	}
	f.last = r.GetSeq()
	return &lobbyv1.ApplyOccupancyDeltaResponse{Outcome: lobbyv1.DeltaOutcome_DELTA_OUTCOME_APPLIED}, nil
}

func (f *seqLobby) ApplyOccupancySnapshot(_ context.Context, r *lobbyv1.ApplyOccupancySnapshotRequest, _ ...grpc.CallOption) (*lobbyv1.ApplyOccupancySnapshotResponse, error) {
	f.record(fmt.Sprintf("snapshot %d", r.GetSeq()))
	return &lobbyv1.ApplyOccupancySnapshotResponse{}, nil
}

// Changes queued out of order while an earlier one is on its way (joins finishing together)
// reach the Lobby in sequence, with no resync and no snapshot.
func TestQueuedChangesGoInSequence(t *testing.T) {
	lobby := &seqLobby{release: make(chan struct{})}
	read := func(context.Context, string) (int64, int32, int32, error) { return 3, 3, 0, nil }
	l := New(context.Background(), lobby, read, slog.New(slog.NewTextHandler(io.Discard, nil)))
	l.Delta("room", domain.Change{Seq: 1, ViewersDelta: 1})
	wait.Until(t, "the first change on its way", func() bool { return len(lobby.seen()) == 1 })
	l.Delta("room", domain.Change{Seq: 3, ViewersDelta: 1})
	l.Delta("room", domain.Change{Seq: 2, ViewersDelta: 1})
	close(lobby.release)
	l.Wait()
	if got, want := lobby.seen(), []string{"delta 1", "delta 2", "delta 3"}; !slices.Equal(got, want) {
		t.Fatalf("the Lobby was sent %q, want %q", got, want)
	}
}
