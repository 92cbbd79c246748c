// Package bridge is the one shape of the gateway's socket kinds (chat rooms, practice rooms):
// ONE upstream stream per room per gateway, kept attached by one reconnect loop, shared by the
// room's sockets through one reference count, and abandoned when it goes silent.
//
// A socket kind's room type embeds Room and implements Upstream (how to run one stream); a Hub
// holds the kind's rooms by name. The lock discipline is the same for every kind: the Hub's
// lock guards only its map and the reference counts, and is never taken while the kind holds
// its room's own lock; a room's goroutine (the loop) only receives, so a stream blocked by
// flow control never stalls its fan-out.
//
//	join:  Hub.Join(name) → the room (the first joiner starts its loop) → the kind adds its socket
//	leave: the kind removes its socket → Hub.Leave(room) (the last one ends the loop and its stream)
//	loop:  Upstream.Attach until it breaks → Upstream.Broken → back off (a random wait below a
//	       ceiling of 10 ms doubling to 1 s, reset once a stream was answered) → Attach again,
//	       on any replica
//
// A stream that breaks because its replica stopped or restarted re-attaches at once, within
// the first ceiling (10 ms). The wait is "full jitter": uniform below the ceiling, the first
// one too, so the rooms of every gateway, which all break at the same instant when a replica
// restarts, do not all come back at the same instants (a fixed 10, 20, 40 ms … 1 s would have
// every room of every gateway call the new replica in one burst each time). While the backend
// connection has no replica ready (the only one restarting), an attach would fail at once: a
// room waits for the connection to be ready instead (gRPC's reconnect, itself jittered, decides
// when), then a random time below Backoff.SpreadPerRoom (250 µs) times the Hub's rooms, at most
// Backoff.Spread (250 ms): a thousand rooms come back spread over a quarter of a second after
// the connection does, not all at their next ceiling (up to 1 s later), and a few at once. A replica
// that stops answering closes nothing (a paused process, a partition): the heartbeat notices.
// While a room hears nothing for Heartbeat.Every the Hub asks the room to Ping (the service
// answers); after Heartbeat.Silence without a word the stream is abandoned and the loop
// re-attaches elsewhere, well before gRPC keepalive's 10 s + timeout would. Until the service
// has answered a ping once, silence is not judged: a service that predates pings is left to
// keepalive rather than have its quiet streams abandoned.
package bridge

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/connectivity"
)

// Upstream is a socket kind's side of one room: how it runs one upstream stream.
type Upstream interface {
	// Attach opens one upstream stream and runs it until it breaks or ctx ends (the room's last
	// socket left, or the stream went silent). ctx is this stream's own: the loop cancels it
	// once Attach returns, so a stream opened with it ends then. It calls Room.Heard for every frame the service
	// sends. answered reports whether the service answered anything on it (the back-off then
	// starts over). An error wrapping ErrEnded ends the room's loop for good.
	Attach(ctx context.Context) (answered bool, err error)
	// Broken is told why a stream broke, before the loop waits to re-attach.
	Broken(err error)
	// Closed is told that the backend connection was closed (the gateway is shutting down):
	// the loop has ended.
	Closed()

	room() *Room
}

// Pinger is an Upstream whose service answers a ping on the stream; the Hub asks it to ping
// a stream that has been quiet for Heartbeat.Every. Ping may block (a stream blocked by flow
// control): the Hub calls it from a goroutine of its own.
type Pinger interface {
	Ping()
}

// ErrEnded ends a room's loop: the room ended at the service and its sockets are closed.
var ErrEnded = errors.New("room ended")

// ErrSilent is why a stream was abandoned: the service said nothing for Heartbeat.Silence,
// not even to a ping.
var ErrSilent = errors.New("the upstream went silent: nothing heard, not even an answer to a ping")

// Heartbeat is how a silent upstream is noticed. Zero values have the defaults in comments.
type Heartbeat struct {
	// Every is how long a stream may be quiet before it is pinged. Default 1 s.
	Every time.Duration
	// Silence is how long a stream may say nothing before it is abandoned. Default 2 s: with
	// the check every Every/2, a silent replica is left within 2.5 s, and a second unlucky
	// pick of it (round robin still holds its open connection) within 5 s.
	Silence time.Duration
}

func (h Heartbeat) withDefaults() Heartbeat {
	if h.Every <= 0 {
		h.Every = time.Second
	}
	if h.Silence <= 0 {
		h.Silence = 2 * time.Second
	}
	return h
}

// Backoff is how long a room waits before it attaches again. Zero values have the defaults
// in comments.
type Backoff struct {
	// Min is the first ceiling, after a stream that was answered. Default 10 ms.
	Min time.Duration
	// Max is the highest ceiling. Default 1 s.
	Max time.Duration
	// Spread is how long after the backend connection is ready again the rooms that waited
	// for it attach at most: each at a random time below SpreadPerRoom times the Hub's rooms,
	// and below Spread. Default 250 ms.
	Spread time.Duration
	// SpreadPerRoom is the spread each room adds: a gateway with few rooms sends them back at
	// once, one with a thousand spreads them over Spread. Default 250 µs.
	SpreadPerRoom time.Duration
	// Rand returns a number in [0, 1): the wait is Rand() times the ceiling. Default
	// math/rand/v2's Float64; a test injects a seeded source.
	Rand func() float64
}

func (b Backoff) withDefaults() Backoff {
	if b.Min <= 0 {
		b.Min = 10 * time.Millisecond
	}
	if b.Max <= 0 {
		b.Max = time.Second
	}
	if b.Max < b.Min {
		b.Max = b.Min
	}
	if b.Spread <= 0 {
		b.Spread = 250 * time.Millisecond
	}
	if b.SpreadPerRoom <= 0 {
		b.SpreadPerRoom = 250 * time.Microsecond
	}
	if b.Rand == nil {
		b.Rand = rand.Float64
	}
	return b
}

// retry is one room's back-off: the ceiling of its next wait.
type retry struct {
	b       Backoff
	ceiling time.Duration
}

func newRetry(b Backoff) *retry { return &retry{b: b, ceiling: b.Min} }

// spread is the wait of a room that waited for the connection to be ready, one of rooms:
// below SpreadPerRoom times rooms, and below Spread.
func (r *retry) spread(rooms int) time.Duration {
	return time.Duration(r.b.Rand() * float64(min(r.b.Spread, r.b.SpreadPerRoom*time.Duration(rooms))))
}

// answered starts the ceilings over: the stream that broke had been answered.
func (r *retry) answered() { r.ceiling = r.b.Min }

// next is the wait before the next attach: uniform in [0, ceiling), after which the ceiling
// doubles, up to Max.
func (r *retry) next() time.Duration {
	d := time.Duration(r.b.Rand() * float64(r.ceiling))
	r.ceiling = min(r.ceiling*2, r.b.Max)
	return d
}

// Room is the bridge's part of a room: its name, its reference count and its life. Embed it in
// the socket kind's room type (as a value); the Hub fills it.
type Room struct {
	name   string
	refs   int // sockets and joiners; guarded by the Hub's lock
	ctx    context.Context
	cancel context.CancelFunc
	heard  atomic.Int64 // when the service was last heard from, in Unix nanoseconds
	pong   *atomic.Bool // the Hub's: its service has answered a ping
}

func (r *Room) room() *Room { return r }

// Name is the room's name (its key in the Hub).
func (r *Room) Name() string { return r.name }

// Heard records that the service sent a frame on the room's stream.
func (r *Room) Heard() { r.heard.Store(time.Now().UnixNano()) }

// Pong records an answer to a ping: the service answers pings, so the Hub judges silence.
func (r *Room) Pong() {
	r.Heard()
	r.pong.Store(true)
}

// Hub holds one socket kind's rooms on this gateway, by name.
type Hub[U Upstream] struct {
	conn      *grpc.ClientConn
	newRoom   func(name string) U
	heartbeat Heartbeat
	backoff   Backoff
	// after is the timer of a room's wait before it attaches again (time.After; a test's own).
	after func(time.Duration) <-chan time.Time
	// untilReady waits until conn has a replica ready (readyOf; a test's own): false when ctx
	// ended first, waited when it was not ready at once.
	untilReady func(ctx context.Context) (waited, ok bool)
	// pong is set once the service answered a ping: until then (a service that predates pings)
	// silence is left to gRPC keepalive, so streams that are merely quiet are not abandoned.
	pong atomic.Bool

	mu    sync.Mutex
	rooms map[string]U
}

// NewHub holds rooms made by newRoom, whose streams run over conn (a closed conn ends every
// loop), judged by hb when the rooms are Pingers.
func NewHub[U Upstream](conn *grpc.ClientConn, hb Heartbeat, newRoom func(name string) U) *Hub[U] {
	return &Hub[U]{conn: conn, newRoom: newRoom, heartbeat: hb.withDefaults(), backoff: Backoff{}.withDefaults(), after: time.After,
		untilReady: readyOf(conn), rooms: map[string]U{}}
}

// readyOf waits until conn is READY (asking an idle one to connect), or ctx ends, or the
// connection is shut down (then it returns at once: the loop notices).
func readyOf(conn *grpc.ClientConn) func(ctx context.Context) (bool, bool) {
	return func(ctx context.Context) (waited, ok bool) {
		for {
			s := conn.GetState()
			switch s {
			case connectivity.Ready, connectivity.Shutdown:
				return waited, true
			case connectivity.Idle:
				conn.Connect()
			}
			waited = true
			if !conn.WaitForStateChange(ctx, s) {
				return waited, false
			}
		}
	}
}

// WithBackoff sets how rooms wait before attaching again; call it before the first Join.
func (h *Hub[U]) WithBackoff(b Backoff) *Hub[U] {
	h.backoff = b.withDefaults()
	return h
}

// Join takes a reference on the room name, making it (and starting its loop) for the first
// joiner. Every Join is matched by one Leave.
func (h *Hub[U]) Join(name string) U {
	h.mu.Lock()
	defer h.mu.Unlock()
	u, ok := h.rooms[name]
	if !ok {
		u = h.newRoom(name)
		r := u.room()
		r.name, r.pong = name, &h.pong
		r.ctx, r.cancel = context.WithCancel(context.Background())
		h.rooms[name] = u
		go h.run(u)
	}
	u.room().refs++
	return u
}

// Leave gives back a reference Join took; the last one ends the room's loop and its stream.
func (h *Hub[U]) Leave(u U) {
	r := u.room()
	h.mu.Lock()
	defer h.mu.Unlock()
	r.refs--
	if r.refs == 0 {
		h.forgetLocked(u)
		r.cancel()
	}
}

// Forget takes an ended room out of the Hub, so the next joiner of its name gets a new one;
// the references still held on it are given back as usual.
func (h *Hub[U]) Forget(u U) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.forgetLocked(u)
}

func (h *Hub[U]) forgetLocked(u U) {
	if cur, ok := h.rooms[u.room().name]; ok && cur.room() == u.room() {
		delete(h.rooms, u.room().name)
	}
}

// run keeps the room attached until its last socket leaves, the room ends, or the backend
// connection closes.
func (h *Hub[U]) run(u U) {
	r := u.room()
	defer r.cancel()
	wait := newRetry(h.backoff)
	for {
		answered, err := h.attach(u)
		if r.ctx.Err() != nil || errors.Is(err, ErrEnded) {
			return
		}
		if h.conn.GetState() == connectivity.Shutdown {
			u.Closed()
			return
		}
		if answered {
			wait.answered()
		}
		u.Broken(err)
		if !h.sleep(r.ctx, wait.next()) {
			return
		}
		waited, ok := h.untilReady(r.ctx)
		if !ok || waited && !h.sleep(r.ctx, wait.spread(h.count())) {
			return
		}
	}
}

// count is how many rooms the Hub holds.
func (h *Hub[U]) count() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.rooms)
}

// sleep waits d on the Hub's timer: false when ctx ended first.
func (h *Hub[U]) sleep(ctx context.Context, d time.Duration) bool {
	select {
	case <-ctx.Done():
		return false
	case <-h.after(d):
		return true
	}
}

// attach runs one stream under the heartbeat's watch.
func (h *Hub[U]) attach(u U) (bool, error) {
	r := u.room()
	ctx, cancel := context.WithCancelCause(r.ctx)
	defer cancel(nil)
	if p, ok := any(u).(Pinger); ok {
		r.Heard()
		h.watch(ctx, cancel, r, p)
	}
	answered, err := u.Attach(ctx)
	if errors.Is(context.Cause(ctx), ErrSilent) {
		err = ErrSilent
	}
	return answered, err
}

// watch checks the stream every Heartbeat.Every/2 from a timer (no goroutine while all is well):
// quiet that long, it is pinged; silent for Heartbeat.Silence (and the service answers pings),
// it is abandoned. It stops when ctx ends.
func (h *Hub[U]) watch(ctx context.Context, abandon context.CancelCauseFunc, r *Room, p Pinger) {
	w := &watcher{ctx: ctx, abandon: abandon, r: r, p: p, hb: h.heartbeat}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.t = time.AfterFunc(w.hb.Every/2, w.check)
	context.AfterFunc(ctx, func() {
		w.mu.Lock()
		defer w.mu.Unlock()
		w.t.Stop()
	})
}

// watcher is one stream's heartbeat check.
type watcher struct {
	ctx     context.Context
	abandon context.CancelCauseFunc
	r       *Room
	p       Pinger
	hb      Heartbeat

	mu sync.Mutex
	t  *time.Timer
}

func (w *watcher) check() {
	if w.ctx.Err() != nil {
		return
	}
	quiet := time.Duration(time.Now().UnixNano() - w.r.heard.Load())
	if quiet >= w.hb.Silence && w.r.pong.Load() {
		w.abandon(ErrSilent)
		return
	}
	if quiet >= w.hb.Every {
		go w.p.Ping()
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.ctx.Err() == nil {
		w.t.Reset(w.hb.Every / 2)
	}
}
