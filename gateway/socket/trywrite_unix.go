//go:build darwin || linux || openbsd

package socket

import (
	"errors"
	"sync"

	"golang.org/x/sys/unix"
)

// tryWrite writes fs in one writev if the connection can take it without waiting, the
// unwritten tail of an earlier frame first, and returns the frames it did not start: none,
// some (the kernel's buffer filled), or all (it was full, or a write is under way), and
// whether everything, tail included, is written. A frame it ends inside is finished by
// whoever writes next (c.tail). It never waits: a flusher calls it for every socket of a
// room's fan-out. An error is the connection's: it is broken.
func (c *netConn) tryWrite(fs []Frame) (rest []Frame, finished bool, err error) {
	if c.raw == nil || !c.wmu.TryLock() {
		return fs, false, nil
	}
	defer c.wmu.Unlock()
	w := writes.Get().(*inlineWrite)
	defer w.release()
	if c.tail != nil {
		w.iovs = append(w.iovs, c.tail)
	}
	for _, f := range fs {
		w.iovs = append(w.iovs, f)
	}
	if err := c.raw.Write(w.once); err != nil {
		return fs, false, err
	}
	switch {
	case w.err == nil:
		rest = c.wrote(fs, w.n)
		return rest, len(rest) == 0 && c.tail == nil, nil
	case errors.Is(w.err, unix.EAGAIN), errors.Is(w.err, unix.EINTR):
		return fs, false, nil
	default:
		return fs, false, w.err
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
