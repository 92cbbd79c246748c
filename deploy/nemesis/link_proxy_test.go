//go:build nemesis

package nemesis

import (
	"bufio"
	"io"
	"net"
	"sync/atomic"
	"testing"
	"time"
)

// TestLinkProxyHoldsByTheKindKnownNow: a connection accepted while its source was taken for one
// kind, and known as another since (a sentinel's first links, dialed before its address was
// registered), is held as the kind it is now. Holding the kind it was taken for lets it through.
func TestLinkProxyHoldsByTheKindKnownNow(t *testing.T) {
	echo, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = echo.Close() })
	go func() {
		for {
			c, err := echo.Accept()
			if err != nil {
				return
			}
			go func() { _, _ = io.Copy(c, c) }()
		}
	}()

	var known atomic.Pointer[string]
	unknown := fromReplica // what store.kind says of an address not yet registered
	known.Store(&unknown)
	p := newLinkProxy(t, "127.0.0.1", func(net.Addr) string { return *known.Load() })
	p.retarget(echo.Addr().String())
	c, err := net.Dial("tcp", net.JoinHostPort("127.0.0.1", p.port()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	r := bufio.NewReader(c)
	// within bounds a wait for an echo that may be held: long for one that must come (a bound
	// only against hanging), short for one that must not (an echo late past it passes wrongly,
	// never fails wrongly).
	roundTrip := func(msg string, within time.Duration) error {
		if err := c.SetDeadline(time.Now().Add(within)); err != nil {
			return err
		}
		if _, err := io.WriteString(c, msg+"\n"); err != nil {
			return err
		}
		_, err := r.ReadString('\n')
		return err
	}
	if err := roundTrip("before", time.Minute); err != nil {
		t.Fatalf("echo through the proxy, nothing held: %v", err)
	}

	sentinel := fromSentinel
	known.Store(&sentinel)
	p.hold(fromReplica)
	if err := roundTrip("replicas held", time.Minute); err != nil {
		t.Fatalf("echo from a sentinel's address, accepted as a replica's, replicas held: %v, want it through", err)
	}
	p.release()
	p.hold(fromSentinel)
	if err := roundTrip("sentinels held", 500*time.Millisecond); err == nil {
		t.Fatal("echo from a sentinel's address, accepted as a replica's, sentinels held: answered, want it held")
	}
	p.release()
}
