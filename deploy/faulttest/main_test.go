//go:build faulttest

package faulttest

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"sync"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/redis/go-redis/v9"

	"github.com/vigil-dev/vigil/pkg/redistest"
	"github.com/vigil-dev/vigil/pkg/server"
	"github.com/vigil-dev/vigil/pkg/server/servertest"
)

func TestMain(m *testing.M) {
	// go-redis logs every failed dial to a killed node; the tests count outcomes instead.
	redis.SetLogger(quietLogger{})
	redistest.Main(m)
}

type quietLogger struct{}

func (quietLogger) Printf(context.Context, string, ...any) {}

// start runs a service's Run in the background until the test ends and returns a client
// connection to it.
func start(t *testing.T, run server.Run) *grpc.ClientConn {
	t.Helper()
	return servertest.Dial(t, servertest.Start(t, "service", run).Addr)
}

// events counts a service's structured log lines by their "event" key, for effects that only
// the log shows (an alarm transition that changed something).
type events struct {
	mu      sync.Mutex
	changed map[string]int // object id → alarm firings that changed it
	retries int
	fired   int
}

func newEvents() *events { return &events{changed: map[string]int{}} }

// Logger is a slog.Logger whose JSON lines feed e.
func (e *events) Logger() *slog.Logger {
	return slog.New(slog.NewJSONHandler(e, &slog.HandlerOptions{Level: slog.LevelInfo}))
}

// Write takes one or more JSON lines: a slog line per call, or a batch of the reservations
// service's alarm lines (its AlarmLog), of which only the "done" phase is an effect.
func (e *events) Write(p []byte) (int, error) {
	for _, line := range bytes.Split(p, []byte("\n")) {
		var m map[string]any
		if json.Unmarshal(line, &m) != nil {
			continue
		}
		if m["event"] != "alarm" && (m["event"] != "reservation-alarm" || m["phase"] != "done") {
			continue
		}
		e.mu.Lock()
		e.fired++
		if m["changed"] == true {
			id, _ := m["id"].(string)
			e.changed[id]++
		}
		if m["isRetry"] == true {
			e.retries++
		}
		e.mu.Unlock()
	}
	return len(p), nil
}

// snapshot is (effects logged, objects changed more than once, retried firings).
func (e *events) snapshot() (effects, doubled, retries int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, n := range e.changed {
		effects += n
		if n > 1 {
			doubled++
		}
	}
	return effects, doubled, e.retries
}

func grpcClient(addr string) (*grpc.ClientConn, error) {
	return grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
}
