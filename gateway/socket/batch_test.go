package socket

import (
	"bytes"
	"io"
	"net"
	"testing"
	"time"
)

// TestBurstsAllocateNothing: queueing a burst on a socket and writing it allocate nothing once
// warm, on a socket's own writer and on a flusher. A fan-out queues on every socket of a room
// at once, and a queue and a writev list made per socket per burst fragmented the heap around
// the sockets' long-lived objects: an idle practice-room socket held ~1.7 KiB more heap after
// a room's joins (docs/BENCHMARKS.md). Not parallel: AllocsPerRun counts the whole process's
// allocations. Under the race detector sync.Pool drops a share of its items on purpose, so
// there the bursts are written and their delivery checked, their allocations not counted.
func TestBurstsAllocateNothing(t *testing.T) {
	server, client := tcpPair(t)
	received := make(chan int64, 1)
	go func() {
		n, _ := io.Copy(io.Discard, client)
		received <- n
	}()
	s := &Conn{nc: &netConn{Conn: server}, lim: &Limits{SendQueue: 256, WriteTimeout: time.Minute}, flushers: new(flusherPool)}
	burst := []Frame{TextFrame([]byte(`{"type":"join","clientId":"v1"}`)), TextFrame([]byte(`{"type":"occupancy","viewers":1}`))}
	raw, err := server.(*net.TCPConn).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	s.nc.raw = raw
	const runs = 200
	// As on a socket whose writer runs: SendFrames only queues, and that writer (run here)
	// takes the burst, writes it in one writev, and ends: a writer goroutine of the socket's
	// own, or a flusher.
	for _, w := range []struct {
		name  string
		write func()
	}{{"writeLoop", s.writeLoop}, {"flush", s.flush}} {
		allocs := testing.AllocsPerRun(runs, func() {
			s.mu.Lock()
			s.writing = true
			s.mu.Unlock()
			if !s.SendFrames(burst) {
				t.Fatal("SendFrames refused a burst on an open socket")
			}
			w.write()
		})
		if allocs != 0 && !raceEnabled { // under -race the path runs and delivers, uncounted
			t.Errorf("queueing a burst and writing it with %s allocate %v objects, want 0", w.name, allocs)
		}
	}
	_ = server.Close()
	want := 2 * int64(runs+1) * int64(len(bytes.Join([][]byte{burst[0], burst[1]}, nil)))
	if n := <-received; n != want {
		t.Errorf("the client received %d bytes, want %d (every burst, once)", n, want)
	}
}

// TestControlFrameWaitsForAnUnfinishedFrame: a non-blocking write that the kernel's buffer
// cuts inside a frame leaves the frame's tail to whoever writes next. A control frame the
// library writes meanwhile (a ping, a close) goes after that tail: written at once, it would
// land in the middle of the data frame and corrupt the stream.
func TestControlFrameWaitsForAnUnfinishedFrame(t *testing.T) {
	t.Parallel()
	server, client := tcpPair(t)
	raw, err := server.(*net.TCPConn).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	nc := &netConn{Conn: server, raw: raw}
	var want, got bytes.Buffer
	// Fill the kernel's buffers with frames the client does not read until a write ends
	// inside one. Where a write finds the buffer full at a frame's end, the client takes a
	// little and the next write goes on.
	for i := 0; nc.tail == nil; i++ {
		if i == 10_000 {
			t.Fatal("10,000 frames and no write ended inside one")
		}
		f := TextFrame(bytes.Repeat([]byte{byte('a' + i%26)}, 64<<10+i))
		rest, _, err := nc.tryWrite([]Frame{f})
		if err != nil {
			t.Fatal(err)
		}
		if len(rest) == 0 {
			want.Write(f) // written whole, or started with its tail left
			continue
		}
		if _, err := io.CopyN(&got, client, 4096); err != nil {
			t.Fatal(err)
		}
	}
	ping := []byte{0x89, 0x00} // what the library writes for a ping: FIN, opcode 9, no payload
	want.Write(ping)
	wrote := make(chan error, 1)
	go func() {
		_, err := nc.Write(ping)
		if err == nil {
			err = nc.finish(time.Minute) // as the socket's writer goroutine would, after
		}
		wrote <- err
	}()
	if _, err := io.CopyN(&got, client, int64(want.Len()-got.Len())); err != nil {
		t.Fatal(err)
	}
	if err := <-wrote; err != nil {
		t.Fatalf("the ping's Write: %v", err)
	}
	if !bytes.Equal(got.Bytes(), want.Bytes()) {
		i := 0
		for i < min(got.Len(), want.Len()) && got.Bytes()[i] == want.Bytes()[i] {
			i++
		}
		t.Fatalf("the client's %d bytes differ from the frames and the ping (%d bytes) at byte %d: the ping cut into a frame", got.Len(), want.Len(), i)
	}
}

// tcpPair is a connected loopback TCP pair: writes take the writev path a socket's do.
func tcpPair(t *testing.T) (server, client net.Conn) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, _ := l.Accept()
		accepted <- c
	}()
	client, err = net.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	server = <-accepted
	if server == nil {
		t.Fatal("accept failed")
	}
	t.Cleanup(func() { _ = client.Close(); _ = server.Close() })
	return server, client
}
