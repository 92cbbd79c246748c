package redisx

import (
	"context"
	"errors"
	"net"
	"testing"
)

// addrConn is a connection that only says where it leads, and writes nowhere.
type addrConn struct {
	net.Conn
	remote net.Addr
}

func (c addrConn) RemoteAddr() net.Addr        { return c.remote }
func (c addrConn) Write(b []byte) (int, error) { return len(b), nil }

// TestConnectionsOfAnotherServerRefuseWrites: once the client dialed another address (a
// failover, a name that moved), its connections to the former one refuse to write, and so do
// those to the new one after a late dial reached the former again; a round confirms only writes
// made in its own generation. Under async nothing is refused.
func TestConnectionsOfAnotherServerRefuseWrites(t *testing.T) {
	var s servers
	enforce := true
	dialTo := func(ip string) net.Conn {
		t.Helper()
		dial := s.dialHook(func(context.Context, string, string) (net.Conn, error) {
			return addrConn{remote: &net.TCPAddr{IP: net.ParseIP(ip), Port: 6379}}, nil
		}, func() bool { return enforce })
		c, err := dial(context.Background(), "tcp", "FailoverClient")
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	write := func(c net.Conn) error { _, err := c.Write([]byte("*1\r\n$4\r\nPING\r\n")); return err }

	old1, old2 := dialTo("10.0.0.1"), dialTo("10.0.0.1")
	gen := s.generation()
	if err := write(old1); err != nil {
		t.Fatalf("Write on a connection to the only server = %v, want nil", err)
	}
	fresh := dialTo("10.0.0.2")
	if s.generation() == gen {
		t.Fatalf("generation %d after a dial reached another address, want a new one", gen)
	}
	for _, c := range []net.Conn{old1, old2} {
		if err := write(c); !errors.Is(err, errServerChanged) {
			t.Fatalf("Write to the former server after a dial reached another = %v, want errServerChanged", err)
		}
	}
	if err := write(fresh); err != nil {
		t.Fatalf("Write to the new server = %v, want nil", err)
	}
	late := dialTo("10.0.0.1")
	if err := write(fresh); !errors.Is(err, errServerChanged) {
		t.Fatalf("Write to 10.0.0.2 after a late dial reached 10.0.0.1 = %v, want errServerChanged", err)
	}
	if err := write(late); err != nil {
		t.Fatalf("Write on the latest connection = %v, want nil", err)
	}
	enforce = false
	if err := write(old1); err != nil {
		t.Fatalf("Write on a former server's connection under async = %v, want nil", err)
	}
}
