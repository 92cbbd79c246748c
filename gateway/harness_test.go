package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vigil-dev/vigil/gateway/auth"
)

// freeAddr reserves a loopback port for a service that must come back on the same address
// after a restart.
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close()
	return addr
}

// running is a service started in-process with its Run function.
type running struct {
	addr   string
	cancel context.CancelFunc
	done   chan error
}

// startService runs run(ctx, ready) in a goroutine and waits until it listens.
func startService(t *testing.T, name string, run func(ctx context.Context, ready func(net.Addr)) error) *running {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	r := &running{cancel: cancel, done: make(chan error, 1)}
	addrc := make(chan string, 1)
	go func() { r.done <- run(ctx, func(a net.Addr) { addrc <- a.String() }) }()
	select {
	case r.addr = <-addrc:
	case err := <-r.done:
		cancel()
		t.Fatalf("%s did not start: %v", name, err)
	case <-time.After(30 * time.Second):
		cancel()
		t.Fatalf("%s did not start within 30s", name)
	}
	t.Cleanup(r.stop)
	return r
}

// stop ends the service and waits for its drain.
func (r *running) stop() {
	r.cancel()
	select {
	case <-r.done:
	case <-time.After(15 * time.Second):
	}
}

// startGateway serves the gateway for the given backends on an httptest server.
func startGateway(t *testing.T, b Backends) *httptest.Server {
	t.Helper()
	g, err := New(context.Background(), Options{Backends: b, Logger: testLogger(t)})
	if err != nil {
		t.Fatalf("gateway.New: %v", err)
	}
	srv := httptest.NewServer(g.Handler())
	t.Cleanup(func() { srv.Close(); g.Close() })
	return srv
}

// logBuffer collects a service's JSON log lines so a test can count events.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

// events returns the decoded log lines whose fields all equal want.
func (l *logBuffer) events(want map[string]any) []map[string]any {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []map[string]any
	for _, line := range strings.Split(l.buf.String(), "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(line), &m) != nil {
			continue
		}
		match := true
		for k, v := range want {
			if m[k] != v {
				match = false
				break
			}
		}
		if match {
			out = append(out, m)
		}
	}
	return out
}

func testLogger(t *testing.T) *slog.Logger {
	return slog.New(slog.NewJSONHandler(io.Discard, nil))
}

// apiResponse is an HTTP answer with its JSON body decoded (numbers kept as json.Number).
type apiResponse struct {
	code int
	body map[string]any
	raw  string
}

func call(t *testing.T, method, url, body string, header ...string) apiResponse {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	out := apiResponse{code: res.StatusCode, raw: string(raw)}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	_ = dec.Decode(&out.body)
	return out
}

// routeScopes is the route table (gateway/auth/scopes.go), pattern to scope.
var routeScopes = func() map[string]string {
	m := map[string]string{}
	for _, p := range auth.Routes() {
		m[p], _ = auth.Scope(p)
	}
	return m
}()
