package socket

import (
	"context"
	"net"
	"slices"
	"sync"
	"time"

	"github.com/coder/websocket"
	"golang.org/x/time/rate"
)

// Limits are a socket route's limits. Every zero value has the default in its comment.
type Limits struct {
	// MaxFrame is the largest frame a client may send, in bytes; larger closes with 1009.
	// Default 16 KiB.
	MaxFrame int64
	// PingInterval is how often the server pings a client. Default 25s.
	PingInterval time.Duration
	// PongTimeout is how long the server waits for a pong before it closes the socket.
	// Default 10s.
	PongTimeout time.Duration
	// SendQueue is how many frames may wait for a slow client; one more closes it with 1013.
	// Default 256.
	SendQueue int
	// WriteTimeout bounds one write to a client; a client that takes longer is closed.
	// Default 10s.
	WriteTimeout time.Duration
	// Rate is how many frames a second a client may send on average, and Burst how many at
	// once; a frame over the limit gets an error frame and is dropped. Defaults 20 and 40.
	Rate  float64
	Burst int
}

// WithDefaults fills the zero values.
func (l Limits) WithDefaults() Limits {
	if l.MaxFrame <= 0 {
		l.MaxFrame = 16 << 10
	}
	if l.PingInterval <= 0 {
		l.PingInterval = 25 * time.Second
	}
	if l.PongTimeout <= 0 {
		l.PongTimeout = 10 * time.Second
	}
	if l.SendQueue <= 0 {
		l.SendQueue = 256
	}
	if l.WriteTimeout <= 0 {
		l.WriteTimeout = 10 * time.Second
	}
	if l.Rate <= 0 {
		l.Rate = 20
	}
	if l.Burst <= 0 {
		l.Burst = 40
	}
	return l
}

// Close codes beyond the library's names.
const (
	// TryAgainLater (1013) closes a slow consumer or a socket whose backend is unavailable:
	// it may reconnect and resume.
	TryAgainLater = websocket.StatusTryAgainLater
	// GoingAway (1001) closes every socket when the gateway shuts down.
	GoingAway = websocket.StatusGoingAway
)

// Conn is one accepted WebSocket. One goroutine (the route's reader) calls Read and Allow;
// Send, SendFrame, SendFrames and Close may be called from anywhere.
//
// It is built for many idle sockets: a writer goroutine exists only while frames wait for a
// full kernel buffer (a burst to a socket with room is written by a shared flusher, see
// SendFrames);
// pings run on a timer; the connection's buffers are small. And for fan-out: frames built
// once (TextFrame) are shared by every socket, and a burst of queued frames leaves in one
// writev.
type Conn struct {
	c     *websocket.Conn
	nc    *netConn
	lim   *Limits
	ping  *time.Timer
	rate  *rate.Limiter
	entry *entry
	// flushers write this socket's bursts while its kernel buffer has room: its registry's.
	flushers *flusherPool

	// pack, set before the first Send, lets a burst of queued text frames leave as ONE frame
	// whose payloads are separated by newlines (a client opts in; see PackBursts).
	pack bool

	mu      sync.Mutex
	queue   *batch // nil while nothing is queued
	writing bool
	closed  bool
	// done is closed when the socket is closed for good (by either side).
	done chan struct{}
}

func newConn(c *websocket.Conn, nc *netConn, lim *Limits) *Conn {
	c.SetReadLimit(lim.MaxFrame)
	s := &Conn{c: c, nc: nc, lim: lim, rate: rate.NewLimiter(rate.Limit(lim.Rate), lim.Burst), done: make(chan struct{})}
	s.ping = time.AfterFunc(lim.PingInterval, s.keepAlive)
	return s
}

// PackBursts makes the socket send a burst of queued text frames as one frame, payloads
// separated by "\n" (newline-delimited JSON), as Centrifugo does: under load a client reads
// and the kernel writes far fewer frames. Only for clients that asked for it; call before the
// first Send.
func (s *Conn) PackBursts() { s.pack = true }

// Done is closed once the socket is closed, whoever closed it.
func (s *Conn) Done() <-chan struct{} { return s.done }

// keepAlive pings the client from a timer; a missing pong closes the socket. The pong is read
// by the socket's reader goroutine.
func (s *Conn) keepAlive() {
	ctx, cancel := context.WithTimeout(context.Background(), s.lim.PongTimeout)
	defer cancel()
	if err := s.c.Ping(ctx); err != nil {
		s.CloseNow()
		return
	}
	s.mu.Lock()
	if !s.closed {
		s.ping.Reset(s.lim.PingInterval)
	}
	s.mu.Unlock()
}

// Read returns the next text or binary frame's payload. Only the reader goroutine calls it.
// An oversized frame closes the socket with 1009 and returns an error; so does a client that
// closes or goes away.
func (s *Conn) Read() ([]byte, error) {
	_, data, err := s.c.Read(context.Background())
	if err != nil {
		s.markClosed()
		return nil, err
	}
	return data, nil
}

// Allow takes one token of the socket's frame rate limit; false means the frame is over it.
func (s *Conn) Allow() bool { return s.rate.Allow() }

// Send queues payload as a text frame; see SendFrame.
func (s *Conn) Send(payload []byte) bool { return s.SendFrame(TextFrame(payload)) }

// SendFrame queues a frame without blocking. It returns false when the socket is closed or its
// queue is full; a full queue closes the socket with 1013 (the client should reconnect and
// resume). f is shared, not copied: callers must not change it afterwards.
func (s *Conn) SendFrame(f Frame) bool { return s.SendFrames([]Frame{f}) }

// SendFrames queues several frames at once, in order (a burst: one queue append, one write).
// Like SendFrame, it never blocks, and the frames are shared, not copied.
//
// A socket with nothing queued is handed to the flushers, a few goroutines shared by every
// socket, which write its burst as far as the kernel's socket buffer takes it without waiting
// (one non-blocking writev). Only a socket whose buffer is full gets a writer goroutine of its
// own: a room's fan-out to idle sockets starts no goroutine per socket.
func (s *Conn) SendFrames(fs []Frame) bool {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return false
	}
	if s.queue.len()+len(fs) > s.lim.SendQueue {
		s.closed = true
		s.queue.release()
		s.queue = nil
		s.mu.Unlock()
		go s.close(TryAgainLater, "slow consumer: reconnect and resume with since")
		return false
	}
	if s.queue == nil {
		s.queue = batches.Get().(*batch)
	}
	s.queue.frames = append(s.queue.frames, fs...)
	start := !s.writing
	s.writing = true
	s.mu.Unlock()
	if start {
		s.flushers.add(s)
	}
	return true
}

// flush writes what is queued, as far as the kernel's buffer takes it without waiting. When
// it does not take everything, the socket gets a writer goroutine of its own: it finishes the
// frame the write ended inside and writes the frames not started, ahead of what was queued
// meanwhile. Run by a flusher, which holds the socket's writer role for it.
func (s *Conn) flush() {
	b := s.take()
	if b == nil {
		return
	}
	rest, finished, err := s.nc.tryWrite(b.frames)
	if err != nil {
		b.release()
		s.markClosed()
		s.endWriting()
		go s.c.CloseNow() // it waits for the library's goroutines: not on a flusher
		return
	}
	s.mu.Lock()
	if len(rest) > 0 && !s.closed {
		if s.queue == nil {
			s.queue = batches.Get().(*batch)
		}
		s.queue.frames = slices.Insert(s.queue.frames, 0, rest...)
	}
	b.release()
	switch {
	case s.closed:
		s.writing = false
		s.mu.Unlock()
	case !finished:
		s.mu.Unlock()
		s.startWriter()
	case s.queue.len() == 0:
		s.writing = false
		s.mu.Unlock()
	default:
		s.mu.Unlock()
		s.flushers.add(s) // more was queued while it wrote
	}
}

func (s *Conn) startWriter() {
	s.flushers.writerStarts.Add(1)
	go s.writeLoop()
}

// writeLoop finishes a frame a flusher's write ended inside, then writes queued frames until
// the queue is empty, and ends: no goroutine waits on an idle socket. Each burst leaves in one
// writev.
func (s *Conn) writeLoop() {
	if err := s.nc.finish(s.lim.WriteTimeout); err != nil {
		s.CloseNow()
		s.endWriting()
		return
	}
	for {
		b := s.take()
		if b == nil {
			return
		}
		err := s.nc.writeFrames(b, s.lim.WriteTimeout)
		b.release()
		if err != nil {
			s.CloseNow()
			s.endWriting()
			return
		}
	}
}

// take is the writer's next burst, packed if the socket asked for it (PackBursts); nil, with
// the writer's role given up, when nothing is queued or the socket is closed.
func (s *Conn) take() *batch {
	s.mu.Lock()
	defer s.mu.Unlock()
	b := s.queue
	s.queue = nil
	if b.len() == 0 || s.closed {
		s.writing = false
		b.release()
		return nil
	}
	b.pack(s.pack)
	return b
}

// endWriting gives up the writer's role after a failed write.
func (s *Conn) endWriting() {
	s.mu.Lock()
	s.writing = false
	s.mu.Unlock()
}

// Close sends the close frame (what is still queued is abandoned) and closes the socket. It
// may block up to a few seconds for the handshake; call it from the reader goroutine or its own.
func (s *Conn) Close(code websocket.StatusCode, reason string) {
	s.markClosed()
	s.close(code, reason)
}

// CloseNow closes the socket without a close frame.
func (s *Conn) CloseNow() {
	s.markClosed()
	_ = s.c.CloseNow()
}

func (s *Conn) close(code websocket.StatusCode, reason string) {
	s.ping.Stop()
	_ = s.c.Close(code, reason)
}

func (s *Conn) markClosed() {
	s.mu.Lock()
	s.closed = true
	s.queue.release()
	s.queue = nil
	s.mu.Unlock()
	s.ping.Stop()
}

// batch is a burst of frames queued on a socket, taken whole by its writer. Batches are pooled,
// not made per burst: a room's fan-out queues on every one of its sockets at once, and a new
// queue and writev list per socket per burst (two small objects each) left the heap's spans
// fragmented around the sockets' long-lived objects: after 1,000 viewers joined a practice
// room (each join a burst on every socket), an idle room socket held 9.7 KiB of heap spans
// for 5.4 KiB of live objects.
type batch struct {
	frames []Frame
	bufs   net.Buffers // the frames as writev takes them (writeFrames)
}

var batches = sync.Pool{New: func() any { return new(batch) }}

// maxPooledBatch bounds the batches kept for reuse: a rare huge burst is not held.
const maxPooledBatch = 1024

func (b *batch) len() int {
	if b == nil {
		return 0
	}
	return len(b.frames)
}

// pack makes b's frames one packed frame when the socket asked for it (PackBursts).
func (b *batch) pack(asked bool) {
	if !asked || len(b.frames) < 2 {
		return
	}
	packed := PackFrames(b.frames)
	clear(b.frames)
	b.frames = append(b.frames[:0], packed)
}

// release gives b back to the pool, forgetting its frames. A nil b is nothing to release.
func (b *batch) release() {
	if b == nil {
		return
	}
	if cap(b.frames) > maxPooledBatch || cap(b.bufs) > maxPooledBatch {
		return
	}
	clear(b.frames)
	b.frames = b.frames[:0]
	batches.Put(b)
}
