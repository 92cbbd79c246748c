//go:build nemesis

package nemesis

import (
	"net"
	"sync"
	"sync/atomic"
	"testing"
)

// proxy forwards TCP connections on a loopback port to a target the test may change (a
// restarted replica listens elsewhere). While held, it reads nothing from either side: bytes
// wait in the kernel's buffers, nothing is lost and nothing closes, as in a partition that
// heals before TCP gives up.
type proxy struct {
	lis    net.Listener
	target atomic.Pointer[string]
	held   atomic.Pointer[chan struct{}] // closed when released; nil while traffic flows

	mu    sync.Mutex
	conns map[net.Conn]bool
}

func newProxy(t *testing.T, target string) *proxy {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{lis: l, conns: map[net.Conn]bool{}}
	p.target.Store(&target)
	t.Cleanup(p.close)
	go p.accept()
	return p
}

func (p *proxy) addr() string { return p.lis.Addr().String() }

func (p *proxy) retarget(target string) { p.target.Store(&target) }

// hold stops traffic in both directions on every connection, old and new.
func (p *proxy) hold() {
	ch := make(chan struct{})
	p.held.Store(&ch)
}

// release lets the held traffic through.
func (p *proxy) release() {
	if ch := p.held.Swap(nil); ch != nil {
		close(*ch)
	}
}

func (p *proxy) close() {
	p.release()
	_ = p.lis.Close()
	p.mu.Lock()
	defer p.mu.Unlock()
	for c := range p.conns {
		_ = c.Close()
	}
}

func (p *proxy) track(c net.Conn, on bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if on {
		p.conns[c] = true
	} else {
		delete(p.conns, c)
	}
}

func (p *proxy) accept() {
	for {
		c, err := p.lis.Accept()
		if err != nil {
			return
		}
		go p.serve(c)
	}
}

func (p *proxy) serve(c net.Conn) {
	up, err := net.Dial("tcp", *p.target.Load())
	if err != nil {
		_ = c.Close()
		return
	}
	p.track(c, true)
	p.track(up, true)
	var once sync.Once
	end := func() {
		once.Do(func() {
			_ = c.Close()
			_ = up.Close()
			p.track(c, false)
			p.track(up, false)
		})
	}
	go p.pipe(up, c, end)
	go p.pipe(c, up, end)
}

func (p *proxy) pipe(dst, src net.Conn, end func()) {
	defer end()
	buf := make([]byte, 32<<10)
	for {
		if ch := p.held.Load(); ch != nil {
			<-*ch
		}
		n, err := src.Read(buf)
		if n > 0 {
			if ch := p.held.Load(); ch != nil {
				<-*ch // held while reading: these bytes wait too
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}
