package bridge

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/vigil-dev/vigil/pkg/wait"
)

// fakeRoom is an Upstream whose streams the test drives: each Attach waits until the test
// breaks it (or its ctx ends), and its service answers pings only while it is not silent.
type fakeRoom struct {
	Room
	attaches atomic.Int32
	pings    atomic.Int32
	broken   chan error
	silent   atomic.Bool
	// brk breaks the current stream with an error.
	brk chan error
}

func newFakeRoom() *fakeRoom { return &fakeRoom{broken: make(chan error, 16), brk: make(chan error)} }

func (f *fakeRoom) Attach(ctx context.Context) (bool, error) {
	f.attaches.Add(1)
	f.Heard()
	select {
	case err := <-f.brk:
		return true, err
	case <-ctx.Done():
		return true, ctx.Err()
	}
}

func (f *fakeRoom) Broken(err error) { f.broken <- err }
func (f *fakeRoom) Closed()          {}

func (f *fakeRoom) Ping() {
	f.pings.Add(1)
	if !f.silent.Load() {
		f.Pong()
	}
}

func newTestHub(t *testing.T, hb Heartbeat) (*Hub[*fakeRoom], *sync.Map) {
	t.Helper()
	cc, err := grpc.NewClient("127.0.0.1:1", grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cc.Close() })
	made := &sync.Map{}
	return NewHub(cc, hb, func(name string) *fakeRoom {
		f := newFakeRoom()
		made.Store(name, f)
		return f
	}), made
}

// TestJoinLeaveShareOneRoom: every joiner of a name shares one room (one loop, one stream);
// the last leave ends it, and the next joiner gets a new one.
func TestJoinLeaveShareOneRoom(t *testing.T) {
	t.Parallel()
	h, _ := newTestHub(t, Heartbeat{})
	a := h.Join("r")
	b := h.Join("r")
	if a != b {
		t.Fatalf("Join(r) twice = two rooms, want one")
	}
	wait.Until(t, "the room's stream attached", func() bool { return a.attaches.Load() == 1 })
	h.Leave(a)
	if a.ctx.Err() != nil {
		t.Fatalf("the room ended with a socket still in it")
	}
	h.Leave(b)
	wait.Until(t, "the room's loop ended with its last socket", func() bool { return a.ctx.Err() != nil })
	if c := h.Join("r"); c == a {
		t.Errorf("Join after the last Leave = the ended room, want a new one")
	}
}

// TestBrokenStreamReattaches: a broken stream is told to Broken and attached again; ErrEnded
// ends the loop, and Forget lets the name start over.
func TestBrokenStreamReattaches(t *testing.T) {
	t.Parallel()
	h, _ := newTestHub(t, Heartbeat{})
	r := h.Join("r")
	boom := errors.New("boom")
	r.brk <- boom
	if err := <-r.broken; !errors.Is(err, boom) {
		t.Fatalf("Broken(%v), want %v", err, boom)
	}
	wait.Until(t, "the second stream", func() bool { return r.attaches.Load() == 2 })
	h.Forget(r)
	r.brk <- ErrEnded
	wait.Until(t, "the loop ended", func() bool { return r.ctx.Err() != nil })
	if n := r.attaches.Load(); n != 2 {
		t.Errorf("%d streams after ErrEnded, want 2", n)
	}
	if c := h.Join("r"); c == r {
		t.Errorf("Join after Forget = the ended room, want a new one")
	}
	h.Leave(r)
}

// TestSilentStreamIsAbandoned: a quiet stream is pinged; while the service answers it stays;
// once it answers nothing for Silence, the stream is abandoned (ErrSilent) and re-attached.
func TestSilentStreamIsAbandoned(t *testing.T) {
	t.Parallel()
	h, _ := newTestHub(t, Heartbeat{Every: 20 * time.Millisecond, Silence: 100 * time.Millisecond})
	r := h.Join("r")
	defer h.Leave(r)
	wait.Until(t, "a few answered pings", func() bool { return r.pings.Load() >= 10 })
	if n := r.attaches.Load(); n != 1 {
		t.Fatalf("%d streams while the service answered pings, want 1", n)
	}
	r.silent.Store(true)
	if err := <-r.broken; !errors.Is(err, ErrSilent) {
		t.Fatalf("Broken(%v), want ErrSilent", err)
	}
	wait.Until(t, "re-attached", func() bool { return r.attaches.Load() == 2 })
}

// TestQuietStreamOfAServiceWithoutPings: until the service has answered a ping, silence is
// not judged (a service that predates pings is left to gRPC keepalive).
func TestQuietStreamOfAServiceWithoutPings(t *testing.T) {
	t.Parallel()
	h, _ := newTestHub(t, Heartbeat{Every: 10 * time.Millisecond, Silence: 30 * time.Millisecond})
	r := h.Join("r")
	defer h.Leave(r)
	r.silent.Store(true)
	wait.Until(t, "pings over several silences", func() bool { return r.pings.Load() >= 20 })
	if n := r.attaches.Load(); n != 1 {
		t.Errorf("%d streams to a service that never answered a ping, want 1", n)
	}
}
