package socket

import (
	"bufio"
	"bytes"
	"errors"
	"net"
	"net/http"
	"sync"
	"syscall"
	"time"
)

// hijacker is the one wrapper around a socket's response writer: it hands the WebSocket
// library a connection with small buffers of its own (a socket does not keep the HTTP
// server's 4 KiB reader and 4 KiB writer once the handler returns) that tells the registry
// when it closes.
type hijacker struct {
	http.ResponseWriter
	conn    *netConn
	onClose func()
}

// smallBufSize is the buffer of a socket's reader and of the library's writer (which writes
// only control frames: data frames bypass it). Larger frames are read straight through.
const smallBufSize = 512

// Hijack implements http.Hijacker.
func (h *hijacker) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	nc, brw, err := http.NewResponseController(h.ResponseWriter).Hijack()
	if err != nil {
		return nil, nil, err
	}
	cc := &netConn{Conn: nc, onClose: h.onClose}
	if sc, ok := nc.(syscall.Conn); ok {
		cc.raw, _ = sc.SyscallConn()
	}
	if n := brw.Reader.Buffered(); n > 0 {
		b, _ := brw.Reader.Peek(n)
		cc.ahead = bytes.Clone(b)
	}
	h.conn = cc
	return cc, bufio.NewReadWriter(bufio.NewReaderSize(cc, smallBufSize), bufio.NewWriterSize(cc, smallBufSize)), nil
}

// Unwrap lets http.ResponseController reach the server's writer.
func (h *hijacker) Unwrap() http.ResponseWriter { return h.ResponseWriter }

// netConn is a socket's connection. Reads first return what the HTTP server had read ahead
// before the upgrade. Writes are serialised, so the library's control frames (ping, close) and
// the bridges' data frames never interleave. Close runs onClose once.
type netConn struct {
	net.Conn
	ahead   []byte
	raw     syscall.RawConn // nil when the connection has no file descriptor (TLS): no inline writes
	wmu     sync.Mutex
	once    sync.Once
	onClose func()
}

func (c *netConn) Read(p []byte) (int, error) {
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
func (c *netConn) Write(p []byte) (int, error) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	return c.Conn.Write(p)
}

// Close closes the connection and tells the registry, once.
func (c *netConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() {
		if c.onClose != nil {
			c.onClose()
		}
	})
	return err
}

// writeFrames writes b's frames in one writev, within timeout. The writev list is b's own
// (pooled with it), so a write allocates nothing.
func (c *netConn) writeFrames(b *batch, timeout time.Duration) error {
	bufs := b.bufs[:0]
	if b.head != nil {
		bufs = append(bufs, b.head)
	}
	for _, f := range b.frames {
		bufs = append(bufs, f)
	}
	// WriteTo consumes the list it is given; b keeps the whole one, cleared, for the next burst.
	b.bufs = bufs
	defer func() {
		clear(bufs)
		b.bufs = bufs[:0]
	}()
	c.wmu.Lock()
	defer c.wmu.Unlock()
	_ = c.Conn.SetWriteDeadline(time.Now().Add(timeout))
	_, err := b.bufs.WriteTo(c.Conn)
	_ = c.Conn.SetWriteDeadline(time.Time{})
	if err != nil {
		return errors.Join(errors.New("websocket write"), err)
	}
	return nil
}
