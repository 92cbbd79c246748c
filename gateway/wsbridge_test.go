package gateway

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"
)

// bridgeServer serves one socket route with the given limits; each accepted socket is handed
// to the returned channel, and its reader goroutine echoes frames back with SendFrame.
func bridgeServer(t *testing.T, lim wsLimits) (*httptest.Server, chan *wsSocket, chan error) {
	t.Helper()
	lim = lim.withDefaults()
	socks := make(chan *wsSocket, 4)
	ended := make(chan error, 4)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !isWebSocketUpgrade(r) {
			refuseNonWebSocket(w)
			return
		}
		s, err := acceptSocket(w, r, &lim)
		if err != nil {
			return
		}
		socks <- s
		go func() {
			for {
				data, err := s.Read()
				if err != nil {
					ended <- err
					return
				}
				s.SendFrame(textFrame(data))
			}
		}()
	}))
	t.Cleanup(srv.Close)
	return srv, socks, ended
}

func dialBridge(t *testing.T, srv *httptest.Server, opts *websocket.DialOptions) *websocket.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(srv.URL, "http"), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.CloseNow() })
	return c
}

// TestBridgeKeepAlive: a client that answers pings stays; one that does not is closed.
func TestBridgeKeepAlive(t *testing.T) {
	t.Parallel()
	srv, _, ended := bridgeServer(t, wsLimits{PingInterval: 30 * time.Millisecond, PongTimeout: 300 * time.Millisecond})

	var pings atomic.Int32
	live := dialBridge(t, srv, &websocket.DialOptions{OnPingReceived: func(context.Context, []byte) bool {
		pings.Add(1)
		return true
	}})
	go func() {
		for {
			if _, _, err := live.Read(context.Background()); err != nil {
				return
			}
		}
	}()
	eventually(t, 10*time.Second, func() error {
		if n := pings.Load(); n < 5 {
			return fmt.Errorf("%d pings so far", n)
		}
		return nil
	})
	select {
	case err := <-ended:
		t.Fatalf("a client answering pings was closed: %v", err)
	default:
	}

	// A client that never reads never answers a ping: the server closes it.
	dialBridge(t, srv, nil)
	select {
	case <-ended:
	case <-time.After(10 * time.Second):
		t.Fatal("a silent client was not closed within 10s")
	}
}

// TestBridgeEchoAndLimits: frames are delivered in order, a plain request gets 426, and an
// oversized frame closes with 1009.
func TestBridgeEchoAndLimits(t *testing.T) {
	t.Parallel()
	srv, _, _ := bridgeServer(t, wsLimits{MaxFrame: 1024})
	res := call(t, "GET", srv.URL, "")
	if res.code != http.StatusUpgradeRequired {
		t.Fatalf("plain GET = %d, want 426", res.code)
	}
	c := dialBridge(t, srv, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, msg := range []string{"a", strings.Repeat("b", 200), strings.Repeat("c", 1024)} {
		if err := c.Write(ctx, websocket.MessageText, []byte(msg)); err != nil {
			t.Fatal(err)
		}
		_, got, err := c.Read(ctx)
		if err != nil || string(got) != msg {
			t.Fatalf("echo of %d bytes = %d bytes, %v", len(msg), len(got), err)
		}
	}
	_ = c.Write(ctx, websocket.MessageText, []byte(strings.Repeat("d", 1025)))
	if _, _, err := c.Read(ctx); websocket.CloseStatus(err) != websocket.StatusMessageTooBig {
		t.Fatalf("after an oversized frame: %v, want close 1009", err)
	}
}

// TestBridgeSlowConsumer: a full send queue refuses further frames and closes the socket.
func TestBridgeSlowConsumer(t *testing.T) {
	t.Parallel()
	srv, socks, _ := bridgeServer(t, wsLimits{SendQueue: 4})
	dialBridge(t, srv, nil) // never reads
	var s *wsSocket
	select {
	case s = <-socks:
	case <-time.After(10 * time.Second):
		t.Fatal("no socket accepted")
	}
	frame := textFrame([]byte(strings.Repeat("x", 64<<10)))
	refused := false
	for range 10000 {
		if !s.SendFrame(frame) {
			refused = true
			break
		}
	}
	if !refused {
		t.Fatal("10,000 frames of 64 KiB to a client that never reads were all queued")
	}
	if s.SendFrame(textFrame([]byte("after"))) {
		t.Error("a socket closed as a slow consumer accepted another frame")
	}
}

// TestPackFrames: packed frames carry the payloads in order, newline-separated, under every
// header length.
func TestPackFrames(t *testing.T) {
	t.Parallel()
	payloads := []string{"a", strings.Repeat("b", 200), strings.Repeat("c", 70000)}
	var frames []wsFrame
	for _, p := range payloads {
		f := textFrame([]byte(p))
		if string(f.payload()) != p {
			t.Fatalf("payload of a %d-byte frame is %d bytes", len(p), len(f.payload()))
		}
		frames = append(frames, f)
	}
	got := packFrames(frames)
	if want := strings.Join(payloads, "\n"); string(got.payload()) != want || got[0] != 0x81 {
		t.Fatalf("packed frame: header %x, %d payload bytes; want text, %d", got[0], len(got.payload()), len(want))
	}
}
