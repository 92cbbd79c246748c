// Package lobbylink pushes a replica's occupancy changes and leader activity to the Lobby over
// gRPC. Each room has an outbox drained by at most one goroutine at a time, so one replica's
// deltas for a room arrive in order; a delta the Lobby cannot apply (it answers RESYNC, or the
// call fails) is followed by an absolute snapshot read from the room's own state.
package lobbylink

import (
	"cmp"
	"context"
	"errors"
	"log/slog"
	"slices"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	lobbyv1 "github.com/vigil-dev/vigil/pkg/api/vigil/lobby/v1"
	"github.com/vigil-dev/vigil/services/room/internal/domain"
	"github.com/vigil-dev/vigil/services/room/internal/workers"
)

// callTimeout bounds one call to the Lobby.
const callTimeout = 5 * time.Second

// OccupancyReader reads a room's absolute occupancy for a snapshot.
type OccupancyReader func(ctx context.Context, code string) (seq int64, viewers, leaders int32, err error)

// Link is the outbox to the Lobby.
type Link struct {
	ctx   context.Context
	lobby lobbyv1.LobbyServiceClient
	read  OccupancyReader
	log   *slog.Logger

	mu    sync.Mutex
	boxes map[string]*box
	wg    sync.WaitGroup
	// work drains the outboxes: a push is a task of its own.
	work *workers.Pool
}

type box struct {
	deltas   []domain.Change
	touch    int64
	snapshot bool
}

// New returns a link whose calls live as long as ctx.
func New(ctx context.Context, lobby lobbyv1.LobbyServiceClient, read OccupancyReader, log *slog.Logger) *Link {
	return &Link{ctx: ctx, lobby: lobby, read: read, log: log, boxes: map[string]*box{}, work: workers.New(5 * time.Second)}
}

// Delta queues an occupancy change (nothing when ch.Seq is 0).
func (l *Link) Delta(code string, ch domain.Change) {
	if ch.Seq == 0 {
		return
	}
	l.queue(code, func(b *box) { b.deltas = append(b.deltas, ch) })
}

// Touch queues leader activity at at; touches not yet sent merge into the latest.
func (l *Link) Touch(code string, at time.Time) {
	l.queue(code, func(b *box) { b.touch = max(b.touch, at.UnixMilli()) })
}

// Snapshot queues an absolute occupancy snapshot.
func (l *Link) Snapshot(code string) {
	l.queue(code, func(b *box) { b.snapshot = true })
}

// Wait waits for the outboxes being drained.
func (l *Link) Wait() { l.wg.Wait() }

func (l *Link) queue(code string, add func(*box)) {
	l.mu.Lock()
	b, running := l.boxes[code]
	if !running {
		b = &box{}
		l.boxes[code] = b
	}
	add(b)
	l.mu.Unlock()
	if !running {
		l.wg.Add(1)
		l.work.Go(func() { l.drain(code) })
	}
}

// drain sends the room's queued work until its outbox is empty, then retires it.
func (l *Link) drain(code string) {
	defer l.wg.Done()
	for {
		l.mu.Lock()
		b := l.boxes[code]
		if len(b.deltas) == 0 && b.touch == 0 && !b.snapshot {
			delete(l.boxes, code)
			l.mu.Unlock()
			return
		}
		work := *b
		*b = box{}
		l.mu.Unlock()
		l.send(code, work)
	}
}

func (l *Link) send(code string, w box) {
	// Joins that finish together can queue their changes out of order; the Lobby applies a
	// room's changes only in sequence, so a batch goes in order rather than costing a resync.
	slices.SortFunc(w.deltas, func(a, b domain.Change) int { return cmp.Compare(a.Seq, b.Seq) })
	for _, d := range w.deltas {
		if w.snapshot {
			break // a snapshot covers every later delta
		}
		ctx, cancel := context.WithTimeout(l.ctx, callTimeout)
		res, err := l.lobby.ApplyOccupancyDelta(ctx, &lobbyv1.ApplyOccupancyDeltaRequest{
			Code: code, Seq: d.Seq, ViewersDelta: d.ViewersDelta, LeadersDelta: d.LeadersDelta,
		})
		cancel()
		switch {
		case status.Code(err) == codes.NotFound:
			return // not in the lobby (ended or pruned): nothing to keep current
		case err != nil:
			l.log.Warn("occupancy delta not delivered; sending a snapshot", "event", "occupancy_delta_failed", "code", code, "seq", d.Seq, "err", err)
			w.snapshot = true
		case res.GetOutcome() == lobbyv1.DeltaOutcome_DELTA_OUTCOME_RESYNC:
			w.snapshot = true
		}
	}
	if w.snapshot {
		l.sendSnapshot(code)
	}
	if w.touch > 0 {
		ctx, cancel := context.WithTimeout(l.ctx, callTimeout)
		_, err := l.lobby.TouchRoom(ctx, &lobbyv1.TouchRoomRequest{Code: code, At: w.touch})
		cancel()
		if err != nil && status.Code(err) != codes.NotFound {
			l.log.Warn("lobby touch failed", "event", "lobby_touch_failed", "code", code, "err", err)
		}
	}
}

// sendSnapshot reads the room's occupancy and sends it, retrying with backoff for a while.
func (l *Link) sendSnapshot(code string) {
	backoff := 50 * time.Millisecond
	for attempt := 1; ; attempt++ {
		err := l.trySnapshot(code)
		if err == nil || errors.Is(err, domain.ErrNoState) || status.Code(err) == codes.NotFound {
			return
		}
		if attempt == 6 || l.ctx.Err() != nil {
			// The renewal loop sends a snapshot of every room with sessions here, so this heals.
			l.log.Warn("occupancy snapshot not delivered", "event", "occupancy_snapshot_failed", "code", code, "err", err)
			return
		}
		select {
		case <-time.After(backoff):
		case <-l.ctx.Done():
			return
		}
		backoff *= 2
	}
}

func (l *Link) trySnapshot(code string) error {
	ctx, cancel := context.WithTimeout(l.ctx, callTimeout)
	defer cancel()
	seq, viewers, leaders, err := l.read(ctx, code)
	if err != nil {
		return err
	}
	_, err = l.lobby.ApplyOccupancySnapshot(ctx, &lobbyv1.ApplyOccupancySnapshotRequest{Code: code, Seq: seq, Viewers: viewers, Leaders: leaders})
	return err
}
