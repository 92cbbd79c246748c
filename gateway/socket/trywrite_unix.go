//go:build darwin || linux || openbsd

package socket

import (
	"errors"
	"sync"

	"golang.org/x/sys/unix"
)

// tryWrite writes fs in one writev if the connection can take it without waiting, and returns
// how many bytes left: all, some (the kernel's buffer filled), or none (it was full, or a
// write is already under way). It never waits: a fan-out calls it for every socket of a room.
// An error is the connection's: it is broken.
func (c *netConn) tryWrite(fs []Frame) (int, error) {
	if c.raw == nil || !c.wmu.TryLock() {
		return 0, nil
	}
	defer c.wmu.Unlock()
	w := writes.Get().(*inlineWrite)
	defer w.release()
	for _, f := range fs {
		w.iovs = append(w.iovs, f)
	}
	if err := c.raw.Write(w.once); err != nil {
		return 0, err
	}
	switch {
	case w.err == nil:
		return w.n, nil
	case errors.Is(w.err, unix.EAGAIN), errors.Is(w.err, unix.EINTR):
		return 0, nil
	default:
		return 0, w.err
	}
}

// inlineWrite is one non-blocking writev's arguments and result. They are pooled, with once
// bound to its own: RawConn.Write takes a func, and a closure made per write would allocate.
type inlineWrite struct {
	iovs [][]byte
	n    int
	err  error
	once func(fd uintptr) bool
}

var writes = sync.Pool{New: func() any {
	w := new(inlineWrite)
	w.once = func(fd uintptr) bool {
		w.n, w.err = unix.Writev(int(fd), w.iovs)
		return true // one attempt: never wait for the socket to be writable
	}
	return w
}}

func (w *inlineWrite) release() {
	if cap(w.iovs) > maxPooledBatch {
		return
	}
	clear(w.iovs)
	w.iovs = w.iovs[:0]
	w.n, w.err = 0, nil
	writes.Put(w)
}
