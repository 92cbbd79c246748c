package app

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/vigil-dev/vigil/pkg/alarm"
	lobbyv1 "github.com/vigil-dev/vigil/pkg/api/vigil/lobby/v1"
	"github.com/vigil-dev/vigil/pkg/clock/clocktest"
	"github.com/vigil-dev/vigil/pkg/redistest"
	"github.com/vigil-dev/vigil/pkg/redisx"
	"github.com/vigil-dev/vigil/pkg/server"
	lobbyservice "github.com/vigil-dev/vigil/services/lobby/service"
	"github.com/vigil-dev/vigil/services/room/internal/domain"
	"github.com/vigil-dev/vigil/services/room/internal/hub"
	"github.com/vigil-dev/vigil/services/room/internal/lobbylink"
	"github.com/vigil-dev/vigil/services/room/internal/store"
)

func TestMain(m *testing.M) { redistest.Main(m) }

// failingRemovals is a Lobby client whose RemoveRoom fails while fail is set.
type failingRemovals struct {
	lobbyv1.LobbyServiceClient
	fail atomic.Bool
}

func (f *failingRemovals) RemoveRoom(ctx context.Context, in *lobbyv1.RemoveRoomRequest, opts ...grpc.CallOption) (*lobbyv1.RemoveRoomResponse, error) {
	if f.fail.Load() {
		return nil, errors.New("removal failed on purpose")
	}
	return f.LobbyServiceClient.RemoveRoom(ctx, in, opts...)
}

// TestExpiryCleanUpIsIdempotent runs the alarm's clean-up by hand: it fails half-way (the
// Lobby removal), is retried, and then runs again, with no error and no second effect.
func TestExpiryCleanUpIsIdempotent(t *testing.T) {
	t.Parallel()
	rdb, prefix := redistest.Client(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	lsvc, err := lobbyservice.New(ctx, lobbyservice.Options{
		Core:    server.Core{Redis: redisx.Config{URL: redistest.URL(t)}, Prefix: prefix + "-lobby", Logger: slog.New(slog.NewJSONHandler(io.Discard, nil))},
		IdleTTL: time.Hour,
	})
	if err != nil {
		t.Fatal(err)
	}
	lobbyDone := make(chan error, 1)
	go func() { lobbyDone <- lsvc.Serve(ctx) }()
	defer func() { cancel(); <-lobbyDone }()
	conn, err := grpc.NewClient(lsvc.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	lobby := &failingRemovals{LobbyServiceClient: lobbyv1.NewLobbyServiceClient(conn)}

	clk := clocktest.New(time.Now())
	log := slog.New(slog.NewJSONHandler(io.Discard, nil))
	q, err := alarm.New(rdb, alarm.Options{Prefix: prefix, Namespace: "room", Shards: 2, Now: clk.Now, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	const ttl = time.Minute
	st, err := store.New(rdb, store.Options{Alarms: q, Prefix: prefix, IdleTTL: ttl})
	if err != nil {
		t.Fatal(err)
	}
	h := hub.New(st.Feed(ctx, log), 16, func(b []byte) (any, error) { return b, nil }, log)
	go func() { _ = h.Run(ctx) }()
	link := lobbylink.New(ctx, lobby, st.Occupancy, log)
	// No control is sent here, so no codec is needed.
	a := New(st, h, link, lobbylink.NewClient(lobby), nil, Options{IdleTTL: ttl, SessionLease: time.Hour, Now: clk.Now, Logger: log})

	created, err := lobby.CreateRoom(ctx, &lobbyv1.CreateRoomRequest{Name: "R", Video: &lobbyv1.Video{Title: "V", DurationMs: 1000}})
	if err != nil {
		t.Fatal(err)
	}
	code := created.GetCode()
	s, _, err := a.Open(ctx, Hello{Code: code, Role: domain.Viewer, ClientID: "v"})
	if err != nil {
		t.Fatalf("Open = %v", err)
	}

	// Not idle yet: the alarm re-arms and changes nothing.
	if err := a.HandleAlarm(ctx, alarm.Firing{ID: code, Attempt: 1}); err != nil {
		t.Fatalf("HandleAlarm(active room) = %v", err)
	}
	if due, ok, _ := q.Get(ctx, code); !ok || due.Before(clk.Now()) {
		t.Fatalf("alarm after an early firing = %v, %v; want re-armed in the future", due, ok)
	}

	clk.Set(clk.Now().Add(ttl + time.Second))
	lobby.fail.Store(true)
	if err := a.HandleAlarm(ctx, alarm.Firing{ID: code, Attempt: 1}); err == nil {
		t.Fatal("HandleAlarm with a failing Lobby removal = nil, want an error (so the alarm retries)")
	}
	select {
	case <-s.Done():
		if s.Reason() != domain.ReasonExpired {
			t.Fatalf("session ended with %q, want expired", s.Reason())
		}
	case <-time.After(2 * time.Second):
		t.Fatal("the session was not closed before the Lobby removal")
	}
	if ok, _ := st.Exists(ctx, code); !ok {
		t.Fatal("storage deleted although the Lobby removal failed: it must go last")
	}
	if _, err := lobby.GetRoom(ctx, &lobbyv1.GetRoomRequest{Code: code}); err != nil {
		t.Fatalf("the room left the Lobby although its removal failed: %v", err)
	}

	lobby.fail.Store(false)
	for attempt := 2; attempt <= 3; attempt++ {
		if err := a.HandleAlarm(ctx, alarm.Firing{ID: code, Attempt: attempt}); err != nil {
			t.Fatalf("HandleAlarm attempt %d = %v, want nil", attempt, err)
		}
	}
	if ok, _ := st.Exists(ctx, code); ok {
		t.Fatal("storage still there after the clean-up")
	}
	if _, err := lobby.GetRoom(ctx, &lobbyv1.GetRoomRequest{Code: code}); err == nil {
		t.Fatal("the room is still in the Lobby after the clean-up")
	}
	if _, ok, _ := q.Get(ctx, code); ok {
		t.Fatal("the room still has an alarm after the clean-up")
	}
	// A late join cannot bring it back.
	if _, _, err := a.Open(ctx, Hello{Code: code, Role: domain.Viewer, ClientID: "late"}); !errors.Is(err, domain.ErrNotFound) {
		t.Fatalf("Open after the clean-up = %v, want ErrNotFound", err)
	}
	a.Close(s) // the session's own close after the room is gone changes nothing
}
