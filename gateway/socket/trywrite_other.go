//go:build !(darwin || linux || openbsd)

package socket

// tryWrite writes nothing where there is no non-blocking writev: every burst goes to a writer
// goroutine.
func (c *netConn) tryWrite(fs []Frame) ([]Frame, bool, error) { return fs, false, nil }
