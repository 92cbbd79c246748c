package redisx

import (
	"context"
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
)

// errServerChanged is a connection's write refused because the client has dialed a different
// server since it was opened.
var errServerChanged = errors.New("redis: the client reaches another server now (a failover, or a name that moved)")

// servers tells which server a client's connections reach, so that a shared round confirms
// only writes made on the server its barrier went to. A failover client's connections follow
// Sentinel to a new primary, and a name in a URL may move to another address: a barrier on a
// connection to the new server would confirm writes the old one took, and the new one never
// had.
//
// Every connection carries the generation in which it was dialed; a dial that reaches another
// address than the one before starts a new generation, and a connection of an older generation
// refuses to write. So at any moment only connections to one address write, and a write made
// while the generation stayed the same, confirmed by a round that ended in it, was made on the
// server of the round's barrier.
type servers struct {
	mu   sync.Mutex
	addr string
	gen  atomic.Uint64
}

// generation is the current generation.
func (s *servers) generation() uint64 { return s.gen.Load() }

// dialHook gives each new connection its generation, starting a new one when it reaches
// another address than the last dialed. Connections refuse to write in an older generation
// only while enforce says so (a durability that waits): under async nothing is shared, and a
// name that resolves to several addresses in turn stays usable.
func (s *servers) dialHook(next func(ctx context.Context, network, addr string) (net.Conn, error), enforce func() bool) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		conn, err := next(ctx, network, addr)
		if err != nil {
			return conn, err
		}
		remote := conn.RemoteAddr().String()
		s.mu.Lock()
		if remote != s.addr {
			s.addr = remote
			s.gen.Add(1)
		}
		gen := s.gen.Load()
		s.mu.Unlock()
		g := genConn{Conn: conn, s: s, gen: gen, enforce: enforce}
		if sc, ok := conn.(syscall.Conn); ok {
			// go-redis checks an idle connection's health through its file descriptor.
			return &genSysConn{genConn: g, sc: sc}, nil
		}
		return &g, nil
	}
}

// genConn is a connection that writes only while its generation is the current one.
type genConn struct {
	net.Conn
	s       *servers
	gen     uint64
	enforce func() bool
}

func (c *genConn) Write(b []byte) (int, error) {
	if c.s.gen.Load() != c.gen && c.enforce() {
		return 0, errServerChanged
	}
	return c.Conn.Write(b)
}

// genSysConn is a genConn over a connection with a file descriptor (TCP, not TLS).
type genSysConn struct {
	genConn
	sc syscall.Conn
}

func (c *genSysConn) SyscallConn() (syscall.RawConn, error) { return c.sc.SyscallConn() }
