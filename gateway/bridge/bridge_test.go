package bridge

import (
	"context"
	"errors"
	"math/rand/v2"
	"slices"
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
	// unanswered: the streams break before the service answered anything.
	unanswered atomic.Bool
}

func newFakeRoom() *fakeRoom { return &fakeRoom{broken: make(chan error, 16), brk: make(chan error)} }

func (f *fakeRoom) Attach(ctx context.Context) (bool, error) {
	f.attaches.Add(1)
	f.Heard()
	select {
	case err := <-f.brk:
		return !f.unanswered.Load(), err
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
	h := NewHub(cc, hb, func(name string) *fakeRoom {
		f := newFakeRoom()
		made.Store(name, f)
		return f
	})
	// cc never connects: the rooms' service is taken as ready (TestRoomsWaitForTheConnection
	// drives this itself).
	h.untilReady = func(context.Context) (bool, bool) { return false, true }
	return h, made
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

// seeded is a deterministic source of Backoff.Rand.
func seeded(seed uint64) func() float64 { return rand.New(rand.NewPCG(seed, 1)).Float64 }

// TestBackoffIsFullJitter: each wait is uniform below a ceiling of 10 ms doubling to 1 s (the
// first wait too), and an answered stream starts the ceilings over.
func TestBackoffIsFullJitter(t *testing.T) {
	b := Backoff{Rand: seeded(7)}.withDefaults()
	want := Backoff{Rand: seeded(7)}.withDefaults() // the same draws, to compute the waits
	r := newRetry(b)
	ceiling := 10 * time.Millisecond
	for i := range 12 {
		got := r.next()
		if w := time.Duration(want.Rand() * float64(ceiling)); got != w || got < 0 || got >= ceiling {
			t.Fatalf("wait %d = %v, want %v: uniform in [0, %v)", i, got, w, ceiling)
		}
		ceiling = min(2*ceiling, time.Second)
	}
	r.answered()
	if got, w := r.next(), time.Duration(want.Rand()*float64(10*time.Millisecond)); got != w {
		t.Errorf("the wait after an answered stream = %v, want %v (below 10 ms again)", got, w)
	}
}

// TestRestartedReplicaSpreadsTheReattach: 1,000 rooms whose streams break at the same instant
// (their replica restarted) and whose attaches fail until it is back 3 s later come back spread
// over the last ceiling, not in one burst, and each within one ceiling (1 s) of its return.
// The lockstep back-off this replaced (a wait of exactly the ceiling) is the contrast: every
// room at the same instant.
func TestRestartedReplicaSpreadsTheReattach(t *testing.T) {
	const rooms, down = 1000, 3 * time.Second
	reattach := func(b Backoff) (at []time.Duration) {
		for range rooms {
			r, now := newRetry(b.withDefaults()), time.Duration(0)
			for now < down { // an attach before the replica is back fails at once
				now += r.next()
			}
			at = append(at, now)
		}
		slices.Sort(at)
		return at
	}
	jittered := reattach(Backoff{Rand: seeded(11)})
	lockstep := reattach(Backoff{Rand: func() float64 { return 1 - 1e-12 }}) // the ceiling itself
	if lockstep[0] != lockstep[rooms-1] {
		t.Fatalf("lockstep re-attach spread %v, want every room at one instant", lockstep[rooms-1]-lockstep[0])
	}
	if wait := jittered[rooms-1] - down; wait >= time.Second {
		t.Errorf("the last room re-attached %v after the replica was back, want within 1 s", wait)
	}
	if spread := jittered[rooms-1] - jittered[0]; spread < 800*time.Millisecond {
		t.Errorf("re-attaches spread over %v, want most of the 1 s ceiling", spread)
	}
	// No 10 ms of the burst holds more than 4 % of the rooms (uniform over 1 s: 1 %).
	for i, j := 0, 0; i < rooms; i++ {
		for j < rooms && jittered[j]-jittered[i] < 10*time.Millisecond {
			j++
		}
		if n := j - i; n > rooms*4/100 {
			t.Fatalf("%d rooms re-attached within 10 ms of %v, want at most %d", n, jittered[i], rooms*4/100)
		}
	}
}

// TestHubWaitsTheJitteredBackoff: the room's loop waits what its Backoff draws between
// attaches (on the Hub's timer, injected), the ceiling growing while streams break unanswered
// and starting over after one was answered.
func TestHubWaitsTheJitteredBackoff(t *testing.T) {
	t.Parallel()
	h, _ := newTestHub(t, Heartbeat{})
	waits := make(chan time.Duration, 16)
	h.WithBackoff(Backoff{Rand: seeded(3)})
	h.after = func(d time.Duration) <-chan time.Time {
		waits <- d
		c := make(chan time.Time, 1)
		c <- time.Time{}
		return c
	}
	want := newRetry(Backoff{Rand: seeded(3)}.withDefaults())
	r := h.Join("r")
	defer h.Leave(r)
	r.unanswered.Store(true)
	for i := range 6 {
		r.brk <- errors.New("unavailable")
		<-r.broken
		if got, w := <-waits, want.next(); got != w {
			t.Fatalf("wait %d = %v, want %v", i, got, w)
		}
	}
	r.unanswered.Store(false)
	r.brk <- errors.New("the replica restarted")
	<-r.broken
	want.answered()
	if got, w := <-waits, want.next(); got != w || got >= 10*time.Millisecond {
		t.Errorf("the wait after an answered stream = %v, want %v (below 10 ms)", got, w)
	}
}

// TestRoomsWaitForTheConnection: while the backend connection has no replica ready, a broken
// room waits for it rather than failing attaches on a timer, and once it is ready attaches
// after a random wait below Spread (the rooms spread over it, not all at their next ceiling).
func TestRoomsWaitForTheConnection(t *testing.T) {
	t.Parallel()
	h, _ := newTestHub(t, Heartbeat{})
	waits := make(chan time.Duration, 16)
	h.WithBackoff(Backoff{Rand: seeded(5), Spread: 200 * time.Millisecond})
	h.after = func(d time.Duration) <-chan time.Time {
		waits <- d
		c := make(chan time.Time, 1)
		c <- time.Time{}
		return c
	}
	ready := make(chan struct{})
	var waiting atomic.Int32
	h.untilReady = func(ctx context.Context) (bool, bool) {
		select {
		case <-ready:
			return false, true
		default:
		}
		waiting.Add(1)
		select {
		case <-ready:
			return true, true
		case <-ctx.Done():
			return true, false
		}
	}
	want := newRetry(Backoff{Rand: seeded(5), Spread: 200 * time.Millisecond}.withDefaults())
	r := h.Join("r")
	defer h.Leave(r)
	r.brk <- errors.New("the replica restarted")
	<-r.broken
	if got, w := <-waits, want.next(); got != w {
		t.Fatalf("first wait = %v, want %v", got, w)
	}
	wait.Until(t, "the room waiting for the connection", func() bool { return waiting.Load() == 1 })
	if n := r.attaches.Load(); n != 1 {
		t.Fatalf("%d attaches while the connection was not ready, want 1 (none after the break)", n)
	}
	close(ready)
	// One room: the spread is below one SpreadPerRoom.
	if got, w := <-waits, want.spread(1); got != w || got >= 250*time.Microsecond {
		t.Fatalf("the wait once the connection is ready = %v, want %v (below 250 µs, one room's spread)", got, w)
	}
	wait.Until(t, "attached again", func() bool { return r.attaches.Load() == 2 })
}

// TestSpreadGrowsWithTheRooms: the spread after the connection is back is SpreadPerRoom per
// room the Hub holds, up to Spread: a thousand rooms over 250 ms, ten over 2.5 ms.
func TestSpreadGrowsWithTheRooms(t *testing.T) {
	for _, tc := range []struct {
		rooms int
		below time.Duration
	}{{1, 250 * time.Microsecond}, {10, 2500 * time.Microsecond}, {1000, 250 * time.Millisecond}, {100_000, 250 * time.Millisecond}} {
		r := newRetry(Backoff{Rand: seeded(9)}.withDefaults())
		most := time.Duration(0)
		for range 1000 {
			d := r.spread(tc.rooms)
			if d < 0 || d >= tc.below {
				t.Fatalf("spread(%d) = %v, want in [0, %v)", tc.rooms, d, tc.below)
			}
			most = max(most, d)
		}
		if most < tc.below*9/10 {
			t.Errorf("spread(%d): the longest of 1,000 waits is %v, want close to %v (uniform below it)", tc.rooms, most, tc.below)
		}
	}
}
