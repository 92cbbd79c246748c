package gateway

// The WebSocket plumbing every socket route of the gateway shares (chat now, practice rooms
// later): the upgrade (426 for a plain request), a frame size limit (close 1009), ping/pong
// keep-alive, a per-socket rate limit, and a bounded send queue whose slow consumer is closed
// (1013) instead of slowing its room.
//
// It is built for many idle sockets: the caller runs ONE reader goroutine per socket; a writer
// goroutine exists only while frames are queued; pings run on a timer; the HTTP server's 8 KiB
// of connection buffers are swapped for small ones. And for fan-out: a server frame is not
// masked, so a message is framed once (textFrame) and the same bytes go to every socket; a
// burst of queued frames leaves in one writev.
//
// API: acceptSocket upgrades; (*wsSocket).Read is for the reader goroutine; Send (a payload),
// SendFrame and SendFrames (frames built once by textFrame, for fan-out) queue from anywhere
// without blocking; Allow applies the rate limit; Close ends the socket.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/coder/websocket"
)

// wsLimits are a socket route's limits. Every zero value has the default in its comment.
type wsLimits struct {
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

func (l wsLimits) withDefaults() wsLimits {
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

// Close codes the bridge uses beyond the library's names.
const (
	// closeTryAgainLater (1013) closes a slow consumer: it may reconnect and resume.
	closeTryAgainLater = websocket.StatusTryAgainLater
)

// isWebSocketUpgrade reports whether r asks to upgrade to a WebSocket.
func isWebSocketUpgrade(r *http.Request) bool {
	return headerHasToken(r.Header, "Connection", "upgrade") && headerHasToken(r.Header, "Upgrade", "websocket")
}

func headerHasToken(h http.Header, key, token string) bool {
	for _, v := range h.Values(key) {
		for _, t := range strings.Split(v, ",") {
			if strings.EqualFold(strings.TrimSpace(t), token) {
				return true
			}
		}
	}
	return false
}

// refuseNonWebSocket answers a plain HTTP request to a socket route with 426.
func refuseNonWebSocket(w http.ResponseWriter) {
	w.Header().Set("Upgrade", "websocket")
	w.Header().Set("Connection", "Upgrade")
	writeError(w, http.StatusUpgradeRequired, "This route is a WebSocket: connect with a WebSocket client.")
}

// wsSocket is one accepted WebSocket.
type wsSocket struct {
	c    *websocket.Conn
	nc   *sockConn
	lim  *wsLimits
	ping *time.Timer

	// Rate limit state, touched only by the reader goroutine.
	tokens float64
	refill time.Time

	// pack, set before the first Send, lets a burst of queued text frames leave as ONE frame
	// whose payloads are separated by newlines (a client opts in; see PackBursts).
	pack bool

	mu      sync.Mutex
	queue   []wsFrame
	writing bool
	closed  bool
}

// PackBursts makes the socket send a burst of queued text frames as one frame, payloads
// separated by "\n" (newline-delimited JSON), as Centrifugo does: under load a client reads
// and the kernel writes far fewer frames. Only for clients that asked for it; call before the
// first Send.
func (s *wsSocket) PackBursts() { s.pack = true }

// acceptSocket upgrades the request (the caller has checked isWebSocketUpgrade) and starts
// the socket's keep-alive. The caller must then run one goroutine that calls Read until it
// fails, and may return from the handler: the socket does not hold the HTTP server's buffers.
func acceptSocket(w http.ResponseWriter, r *http.Request, lim *wsLimits) (*wsSocket, error) {
	hw := &smallBufHijacker{ResponseWriter: w}
	c, err := websocket.Accept(hw, r, &websocket.AcceptOptions{
		// The security layer checked the Origin before the upgrade (security.go, AllowedOrigins).
		InsecureSkipVerify: true,
		CompressionMode:    websocket.CompressionDisabled,
	})
	if err != nil {
		return nil, err
	}
	c.SetReadLimit(lim.MaxFrame)
	s := &wsSocket{c: c, nc: hw.conn, lim: lim, tokens: float64(lim.Burst), refill: time.Now()}
	s.ping = time.AfterFunc(lim.PingInterval, s.keepAlive)
	return s, nil
}

// keepAlive pings the client from a timer; a missing pong closes the socket. The pong is read
// by the socket's reader goroutine.
func (s *wsSocket) keepAlive() {
	ctx, cancel := context.WithTimeout(context.Background(), s.lim.PongTimeout)
	defer cancel()
	if err := s.c.Ping(ctx); err != nil {
		s.markClosed()
		_ = s.c.CloseNow()
		return
	}
	s.mu.Lock()
	if !s.closed {
		s.ping.Reset(s.lim.PingInterval)
	}
	s.mu.Unlock()
}

// Read returns the next text or binary frame's payload. Only the reader goroutine calls it.
// An oversized frame closes the socket with 1009 and returns an error.
func (s *wsSocket) Read() ([]byte, error) {
	_, data, err := s.c.Read(context.Background())
	if err != nil {
		s.markClosed()
		return nil, err
	}
	return data, nil
}

// Allow takes one token of the socket's rate limit; false means the frame is over the limit.
// Only the reader goroutine calls it.
func (s *wsSocket) Allow() bool {
	now := time.Now()
	s.tokens += now.Sub(s.refill).Seconds() * s.lim.Rate
	s.refill = now
	if max := float64(s.lim.Burst); s.tokens > max {
		s.tokens = max
	}
	if s.tokens < 1 {
		return false
	}
	s.tokens--
	return true
}

// wsFrame is a complete server-to-client WebSocket frame, header and payload.
type wsFrame []byte

// textFrame frames payload as one unmasked text frame.
func textFrame(payload []byte) wsFrame {
	n := len(payload)
	f := make([]byte, 0, n+10)
	f = append(f, 0x81) // FIN, text
	switch {
	case n < 126:
		f = append(f, byte(n))
	case n < 1<<16:
		f = append(f, 126, byte(n>>8), byte(n))
	default:
		f = append(f, 127)
		f = binary.BigEndian.AppendUint64(f, uint64(n))
	}
	return append(f, payload...)
}

// payload is the frame's payload (server frames are unmasked).
func (f wsFrame) payload() []byte {
	switch f[1] & 0x7f {
	case 126:
		return f[4:]
	case 127:
		return f[10:]
	default:
		return f[2:]
	}
}

// packFrames joins text frames into one, payloads separated by newlines.
func packFrames(frames []wsFrame) wsFrame {
	n := len(frames) - 1
	for _, f := range frames {
		n += len(f.payload())
	}
	p := make([]byte, 0, n)
	for i, f := range frames {
		if i > 0 {
			p = append(p, '\n')
		}
		p = append(p, f.payload()...)
	}
	return textFrame(p)
}

// Send queues payload as a text frame; see SendFrame.
func (s *wsSocket) Send(payload []byte) bool { return s.SendFrame(textFrame(payload)) }

// SendFrame queues a frame without blocking. It returns false when the socket is closed or its
// queue is full; a full queue closes the socket with 1013 (the client should reconnect and
// resume). f is shared, not copied: callers must not change it afterwards.
func (s *wsSocket) SendFrame(f wsFrame) bool { return s.SendFrames([]wsFrame{f}) }

// SendFrames queues several frames at once, in order (a burst: one queue append, one write).
// Like SendFrame, it never blocks, and the frames are shared, not copied.
func (s *wsSocket) SendFrames(fs []wsFrame) bool {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return false
	}
	if len(s.queue)+len(fs) > s.lim.SendQueue {
		s.closed = true
		s.queue = nil
		s.mu.Unlock()
		go s.close(closeTryAgainLater, "slow consumer: reconnect and resume with since")
		return false
	}
	s.queue = append(s.queue, fs...)
	start := !s.writing
	s.writing = true
	s.mu.Unlock()
	if start {
		go s.writeLoop()
	}
	return true
}

// writeLoop writes queued frames until the queue is empty, then ends: no goroutine waits on an
// idle socket. Each burst leaves in one writev.
func (s *wsSocket) writeLoop() {
	for {
		s.mu.Lock()
		batch := s.queue
		s.queue = nil
		if len(batch) == 0 || s.closed {
			s.writing = false
			s.mu.Unlock()
			return
		}
		s.mu.Unlock()
		if s.pack && len(batch) > 1 {
			batch = []wsFrame{packFrames(batch)}
		}
		if err := s.nc.writeFrames(batch, s.lim.WriteTimeout); err != nil {
			s.markClosed()
			_ = s.c.CloseNow()
			s.mu.Lock()
			s.writing = false
			s.mu.Unlock()
			return
		}
	}
}

// Close sends the close frame (after what is queued is abandoned) and closes the socket. It
// may block up to a few seconds for the handshake; call it from the reader goroutine or its own.
func (s *wsSocket) Close(code websocket.StatusCode, reason string) {
	s.markClosed()
	s.close(code, reason)
}

func (s *wsSocket) close(code websocket.StatusCode, reason string) {
	s.ping.Stop()
	_ = s.c.Close(code, reason)
}

func (s *wsSocket) markClosed() {
	s.mu.Lock()
	s.closed = true
	s.queue = nil
	s.mu.Unlock()
	s.ping.Stop()
}

// smallBufHijacker hands the WebSocket library a connection with small buffers of its own, so
// a socket does not keep the HTTP server's 4 KiB reader and 4 KiB writer once the handler
// returns.
type smallBufHijacker struct {
	http.ResponseWriter
	conn *sockConn
}

// smallBufSize is the buffer of a socket's reader and of the library's writer (which writes
// only control frames: data frames bypass it). Larger frames are read straight through.
const smallBufSize = 512

// Hijack implements http.Hijacker.
func (h *smallBufHijacker) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	nc, brw, err := http.NewResponseController(h.ResponseWriter).Hijack()
	if err != nil {
		return nil, nil, err
	}
	cc := &sockConn{Conn: nc}
	if n := brw.Reader.Buffered(); n > 0 {
		b, _ := brw.Reader.Peek(n)
		cc.ahead = bytes.Clone(b)
	}
	h.conn = cc
	return cc, bufio.NewReadWriter(bufio.NewReaderSize(cc, smallBufSize), bufio.NewWriterSize(cc, smallBufSize)), nil
}

// Unwrap lets http.ResponseController reach the server's writer.
func (h *smallBufHijacker) Unwrap() http.ResponseWriter { return h.ResponseWriter }

// sockConn is a socket's connection. Reads first return what the HTTP server had read ahead
// before the upgrade. Writes are serialised, so the library's control frames (ping, close) and
// the bridge's data frames never interleave.
type sockConn struct {
	net.Conn
	ahead []byte
	wmu   sync.Mutex
}

func (c *sockConn) Read(p []byte) (int, error) {
	if len(c.ahead) > 0 {
		n := copy(p, c.ahead)
		c.ahead = c.ahead[n:]
		if len(c.ahead) == 0 {
			c.ahead = nil
		}
		return n, nil
	}
	return c.Conn.Read(p)
}

// Write is the library's path: its frames fit its 512-byte buffer, so each is one Write.
func (c *sockConn) Write(p []byte) (int, error) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	return c.Conn.Write(p)
}

// writeFrames writes whole frames in one writev, within timeout.
func (c *sockConn) writeFrames(frames []wsFrame, timeout time.Duration) error {
	bufs := make(net.Buffers, len(frames))
	for i, f := range frames {
		bufs[i] = f
	}
	c.wmu.Lock()
	defer c.wmu.Unlock()
	_ = c.Conn.SetWriteDeadline(time.Now().Add(timeout))
	_, err := bufs.WriteTo(c.Conn)
	_ = c.Conn.SetWriteDeadline(time.Time{})
	if err != nil {
		return errors.Join(errors.New("websocket write"), err)
	}
	return nil
}
