// Package servertest runs Vigil services in-process for tests, each through its real New and
// Serve on a free loopback port, and captures their JSON logs. Only tests import it.
package servertest

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vigil-dev/vigil/pkg/server"
)

// A service's start and drain are bounded (a service drains within its DrainTimeout, 10 s
// by default), so a test that breaks one fails instead of hanging.
const (
	startTimeout = 30 * time.Second
	stopTimeout  = 15 * time.Second
)

// Serve is the Run of the service newSvc(ctx, o) builds, e.g. Serve(lobby.New, lobby.Options{...}).
func Serve[O any, S server.Service](newSvc func(context.Context, O) (S, error), o O) server.Run {
	return server.RunOf(newSvc, func() O { return o })
}

// Running is a service started by Start.
type Running struct {
	// Addr is where the service listens.
	Addr   string
	cancel context.CancelFunc
	done   chan struct{}
	err    error // what run returned, once done is closed
}

// Start runs run in a goroutine and returns once it listens (failing the test when it does
// not within 30 s); the test's cleanup stops it, failing the test when it does not stop.
func Start(t testing.TB, name string, run server.Run) *Running {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	r := &Running{cancel: cancel, done: make(chan struct{})}
	addrc := make(chan string, 1)
	go func() {
		defer close(r.done)
		r.err = run(ctx, func(a net.Addr) { addrc <- a.String() })
	}()
	select {
	case r.Addr = <-addrc:
	case <-r.done:
		cancel()
		t.Fatalf("%s did not start: %v", name, r.err)
	case <-time.After(startTimeout):
		cancel()
		t.Fatalf("%s did not start within %v", name, startTimeout)
	}
	t.Cleanup(func() {
		if !r.Stop() {
			t.Errorf("%s did not stop within %v", name, stopTimeout)
		}
	})
	return r
}

// Stop ends the service and waits for its drain, at most 15 s; false when it did not end in
// time. Stopping a stopped service returns at once.
func (r *Running) Stop() bool {
	r.cancel()
	select {
	case <-r.done:
		return true
	case <-time.After(stopTimeout):
		return false
	}
}

// LogBuffer collects a service's log lines (give it to slog.NewJSONHandler) so a test can read
// or count them; safe for the service's goroutines to write while the test reads.
type LogBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

// Write appends p.
func (l *LogBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

// String is everything written so far.
func (l *LogBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// Events returns the decoded JSON lines whose fields all equal want.
func (l *LogBuffer) Events(want map[string]any) []map[string]any {
	var out []map[string]any
	for _, line := range strings.Split(l.String(), "\n") {
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
