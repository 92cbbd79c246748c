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
// the bridges' data frames never interleave: a frame a non-blocking write ended inside (tail)
// is finished before anything else is written. Close runs onClose once.
type netConn struct {
	net.Conn
	ahead []byte
	raw   syscall.RawConn // nil when the connection has no file descriptor (TLS): no inline writes
	wmu   sync.Mutex
	// tail, under wmu, is the unwritten rest of the frame a non-blocking write (tryWrite) ended
	// inside: the next write, whoever makes it, starts with it.
	tail    []byte
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

// Write is the library's path: its frames fit its 512-byte buffer, so each is one Write. A
// frame a non-blocking write left unfinished goes first: a ping or close frame written into
// the middle of a data frame would corrupt the stream.
func (c *netConn) Write(p []byte) (int, error) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if c.tail != nil {
		if _, err := c.Conn.Write(c.tail); err != nil {
			return 0, err
		}
		c.tail = nil
	}
	return c.Conn.Write(p)
}

// finish writes the tail of a frame a non-blocking write ended inside, if any, within timeout.
func (c *netConn) finish(timeout time.Duration) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if c.tail == nil {
		return nil
	}
	_ = c.Conn.SetWriteDeadline(time.Now().Add(timeout))
	_, err := c.Conn.Write(c.tail)
	_ = c.Conn.SetWriteDeadline(time.Time{})
	if err != nil {
		return errors.Join(errors.New("websocket write"), err)
	}
	c.tail = nil
	return nil
}

// wrote records that a write of the tail and then fs took n bytes, and returns the frames of
// fs it did not start; the rest of a frame it ended inside becomes the tail. Under wmu.
func (c *netConn) wrote(fs []Frame, n int) []Frame {
	if c.tail != nil {
		if n < len(c.tail) {
			c.tail = c.tail[n:]
			return fs
		}
		n -= len(c.tail)
		c.tail = nil
	}
	for i, f := range fs {
		if n < len(f) {
			if n > 0 {
				c.tail = f[n:]
				return fs[i+1:]
			}
			return fs[i:]
		}
		n -= len(f)
	}
	return nil
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

// writeFrames writes the tail of an unfinished frame, if any, and b's frames in one writev,
// within timeout. The writev list is b's own (pooled with it), so a write allocates nothing.
func (c *netConn) writeFrames(b *batch, timeout time.Duration) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	bufs := b.bufs[:0]
	if c.tail != nil {
		bufs = append(bufs, c.tail)
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
	_ = c.Conn.SetWriteDeadline(time.Now().Add(timeout))
	_, err := b.bufs.WriteTo(c.Conn)
	_ = c.Conn.SetWriteDeadline(time.Time{})
	if err != nil {
		return errors.Join(errors.New("websocket write"), err)
	}
	c.tail = nil
	return nil
}
