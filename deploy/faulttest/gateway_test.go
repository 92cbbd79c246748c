//go:build faulttest

package faulttest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/vigil-dev/vigil/gateway"
	chatv1 "github.com/vigil-dev/vigil/pkg/api/vigil/chat/v1"
	"github.com/vigil-dev/vigil/pkg/redistest"
	"github.com/vigil-dev/vigil/pkg/server/servertest"
	"github.com/vigil-dev/vigil/pkg/wait"
	chat "github.com/vigil-dev/vigil/services/chat/service"
)

// chatClient is one WebSocket member of a room that reconnects with since=<last id> whenever its
// socket drops, and checks that ids arrive one after another: no gap, no repeat.
type chatClient struct {
	name       string
	last       atomic.Int64
	reconnects atomic.Int64
	mu         sync.Mutex
	err        error
	joined     chan struct{}
}

func (c *chatClient) fail(err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err == nil {
		c.err = err
	}
}

func (c *chatClient) failed() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// run keeps the client connected until ctx ends.
func (c *chatClient) run(ctx context.Context, addr, room string) {
	first := true
	for ctx.Err() == nil {
		url := fmt.Sprintf("ws://%s/websocket?room=%s&userId=%s&username=%s", addr, room, c.name, c.name)
		if !first {
			url += fmt.Sprintf("&since=%d", c.last.Load())
		}
		dctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		ws, _, err := websocket.Dial(dctx, url, nil)
		cancel()
		if err != nil {
			time.Sleep(20 * time.Millisecond) // backing off between reconnect attempts
			continue
		}
		if !first {
			c.reconnects.Add(1)
		}
		ws.SetReadLimit(4 << 20)
		c.read(ctx, ws, first)
		first = false
		_ = ws.CloseNow()
	}
}

func (c *chatClient) read(ctx context.Context, ws *websocket.Conn, first bool) {
	for {
		_, data, err := ws.Read(ctx)
		if err != nil {
			return
		}
		dec := json.NewDecoder(bytes.NewReader(data)) // a frame may pack several objects
		for {
			var f struct {
				Type     string `json:"type"`
				ID       int64  `json:"id"`
				Messages []struct {
					ID int64 `json:"id"`
				} `json:"messages"`
			}
			if err := dec.Decode(&f); errors.Is(err, io.EOF) {
				break
			} else if err != nil {
				c.fail(fmt.Errorf("%s: bad frame %q: %v", c.name, data, err))
				return
			}
			switch f.Type {
			case "history":
				for _, m := range f.Messages {
					c.see(m.ID)
				}
				if first {
					close(c.joined)
					first = false
				}
			case "message":
				c.see(f.ID)
			}
		}
	}
}

func (c *chatClient) see(id int64) {
	if want := c.last.Load() + 1; id != want {
		c.fail(fmt.Errorf("%s: got message %d, want %d", c.name, id, want))
		return
	}
	c.last.Store(id)
}

// TestFaultGatewayRestartedUnderChatLoad restarts the gateway while messages flow to WebSocket
// members of a room: every member reconnects with since=<last id> and ends with every message,
// in order, none missing or repeated.
func TestFaultGatewayRestartedUnderChatLoad(t *testing.T) {
	t.Parallel()
	const members, messages, restartAt = 20, 400, 150
	conn := start(t, servertest.Serve(chat.New, chat.Options{Core: servertest.Core(t, redistest.Prefix(t), newEvents().Logger())}))
	chatClientRPC := chatv1.NewChatServiceClient(conn)

	// The gateway on a fixed port, so that clients reconnect to the same address.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close()
	runGateway := func() (stop func()) {
		ctx, cancel := context.WithCancel(context.Background())
		up := make(chan struct{})
		done := make(chan error, 1)
		go func() {
			done <- gateway.Run(ctx, gateway.Options{Addr: addr, Backends: gateway.Backends{Chat: conn.Target()},
				Logger: newEvents().Logger(), DrainTimeout: time.Second}, func(net.Addr) { close(up) })
		}()
		select {
		case <-up:
		case err := <-done:
			t.Fatalf("gateway: %v", err)
		}
		return func() { cancel(); <-done }
	}
	stopGateway := runGateway()

	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	clients := make([]*chatClient, members)
	for i := range clients {
		clients[i] = &chatClient{name: fmt.Sprintf("member-%d", i), joined: make(chan struct{})}
		wg.Add(1)
		go func() { defer wg.Done(); clients[i].run(ctx, addr, "resume") }()
	}
	t.Cleanup(func() { cancel(); wg.Wait() })
	for _, c := range clients {
		select {
		case <-c.joined:
		case <-time.After(20 * time.Second):
			t.Fatalf("%s did not join", c.name)
		}
	}

	restarted := time.Duration(0)
	for i := 1; i <= messages; i++ {
		if i == restartAt {
			began := time.Now()
			stopGateway()
			stopGateway = runGateway()
			restarted = time.Since(began)
		}
		if _, err := chatClientRPC.PostMessage(context.Background(), &chatv1.PostMessageRequest{
			Room: "resume", UserId: "poster", Username: "poster", Body: fmt.Sprintf("message %d", i)}); err != nil {
			t.Fatalf("post %d: %v", i, err)
		}
		time.Sleep(2 * time.Millisecond) // pacing the load, not waiting for a result
	}
	defer stopGateway()
	wait.Until(t, "every member to have every message", func() bool {
		for _, c := range clients {
			if c.failed() == nil && c.last.Load() < messages {
				return false
			}
		}
		return true
	})
	lost, reconnects := 0, 0
	for _, c := range clients {
		if err := c.failed(); err != nil {
			t.Fatal(err)
		}
		lost += messages - int(c.last.Load())
		reconnects += int(c.reconnects.Load())
	}
	t.Logf("at stake: %d messages to %d WebSocket members (%d deliveries); gateway restarted after message %d (down %v); %d reconnects with since; lost %d, repeated 0, out of order 0",
		messages, members, messages*members, restartAt-1, restarted.Round(time.Millisecond), reconnects, lost)
	if lost > 0 {
		t.Fatalf("%d deliveries lost", lost)
	}
	if reconnects < members {
		t.Fatalf("%d reconnects for %d members: the restart did not drop every socket", reconnects, members)
	}
}
