package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vigil-dev/vigil/pkg/clock/clocktest"
	"github.com/vigil-dev/vigil/pkg/devstore"
	"github.com/vigil-dev/vigil/pkg/redistest"
	"github.com/vigil-dev/vigil/pkg/wait"
)

// devRun is one run of `vigil dev` in this process.
type devRun struct {
	base   string
	cancel context.CancelFunc
	done   chan error
}

// startDevRun runs the dev runner on the embedded store in dir with the clock c.
func startDevRun(t *testing.T, dir string, c *clocktest.Manual) *devRun {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	r := &devRun{cancel: cancel, done: make(chan error, 1)}
	up := make(chan net.Addr, 1)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	go func() {
		r.done <- startDev(ctx, devOptions{
			HTTPAddr: "127.0.0.1:0",
			Store:    devstore.Options{DataDir: dir, Kind: devstore.Embedded, Logger: log},
			Logger:   log,
			Now:      c.Now,
			Ready:    func(a net.Addr) { up <- a },
		})
	}()
	select {
	case a := <-up:
		r.base = "http://" + a.String()
	case err := <-r.done:
		t.Fatalf("vigil dev did not start: %v", err)
	}
	t.Cleanup(func() { r.stop(t) })
	return r
}

// stop ends the run (Ctrl-C) and waits for it, store written.
func (r *devRun) stop(t *testing.T) {
	t.Helper()
	if r.cancel == nil {
		return
	}
	r.cancel()
	r.cancel = nil
	if err := <-r.done; err != nil {
		t.Fatalf("vigil dev stopped with %v", err)
	}
}

func (r *devRun) call(t *testing.T, method, path, body string) (int, map[string]any) {
	t.Helper()
	req, err := http.NewRequest(method, r.base+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer res.Body.Close()
	var out map[string]any
	raw, _ := io.ReadAll(res.Body)
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatalf("%s %s = %d %s: not JSON", method, path, res.StatusCode, raw)
	}
	return res.StatusCode, out
}

// TestEmbeddedStoreKeepsHoldsAcrossARestart is the lab's "restart before the alarm" step on the
// embedded store: a short hold that comes due while Vigil is stopped expires exactly once after
// the restart, and a long hold keeps its alarm.
func TestEmbeddedStoreKeepsHoldsAcrossARestart(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	c := clocktest.New(time.UnixMilli(1_900_000_000_000)) // the dev runner moves only when the test says so

	run := startDevRun(t, dir, c)
	if code, res := run.call(t, "POST", "/reservations/short-hold", `{"ttlSeconds": 5}`); code != 201 || res["status"] != "held" {
		t.Fatalf("POST short-hold = %d %v, want 201 held", code, res)
	}
	code, long := run.call(t, "POST", "/reservations/long-hold", `{"ttlSeconds": 3600}`)
	if code != 201 || long["alarmAt"] == nil {
		t.Fatalf("POST long-hold = %d %v, want 201 with an alarm", code, long)
	}
	run.stop(t)
	if _, err := os.Stat(filepath.Join(dir, devstore.SnapshotFile)); err != nil {
		t.Fatalf("after a clean stop: %v", err)
	}

	// Vigil is stopped while the short hold comes due.
	c.Add(10 * time.Second)

	run = startDevRun(t, dir, c)
	wait.For(t, "short-hold to expire after the restart", func() error {
		if _, res := run.call(t, "GET", "/reservations/short-hold", ""); res["status"] != "expired" {
			return fmt.Errorf("short-hold = %v", res)
		}
		return nil
	})
	_, short := run.call(t, "GET", "/reservations/short-hold", "")
	if short["expirationCount"] != float64(1) || short["alarmAt"] != nil {
		t.Fatalf("short-hold after the restart = %v, want expired once, no alarm", short)
	}
	_, kept := run.call(t, "GET", "/reservations/long-hold", "")
	if kept["status"] != "held" || kept["alarmAt"] != long["alarmAt"] || kept["expiresAt"] != long["expiresAt"] {
		t.Fatalf("long-hold after the restart = %v, want held with alarmAt %v as before", kept, long["alarmAt"])
	}
	run.stop(t)

	// A third run finds the expiry done: it does not happen again.
	run = startDevRun(t, dir, c)
	_, again := run.call(t, "GET", "/reservations/short-hold", "")
	if again["status"] != "expired" || again["expirationCount"] != float64(1) {
		t.Fatalf("short-hold on the next run = %v, want expired once", again)
	}
	if _, res := run.call(t, "POST", "/reservations/short-hold/replay-alarm", fmt.Sprintf(`{"now": %d}`, c.Now().UnixMilli())); res["changed"] != false {
		t.Fatalf("replaying short-hold's alarm = %v, want changed false", res)
	}
}

// TestDevRefusesAPublicAddress: the dev mode is open, so it listens on loopback only.
func TestDevRefusesAPublicAddress(t *testing.T) {
	t.Parallel()
	err := runDev(context.Background(), []string{"-addr", "0.0.0.0:8080"})
	if err == nil || !strings.Contains(err.Error(), "loopback only") {
		t.Fatalf("vigil dev -addr 0.0.0.0:8080 = %v, want a refusal saying it listens on loopback only", err)
	}
}

// TestDevRefusesADurabilityItsStoreCannotKeep: -redis-durability that is not one of the three,
// and replica on a Redis with no replica, stop vigil dev with a sentence naming the fix.
func TestDevRefusesADurabilityItsStoreCannotKeep(t *testing.T) {
	t.Parallel()
	err := runDev(context.Background(), []string{"-redis-durability", "strong"})
	if err == nil || !strings.Contains(err.Error(), `redis durability "strong": want async`) {
		t.Fatalf("vigil dev -redis-durability strong = %v, want a refusal naming async, replica and fsync", err)
	}
	err = runDev(context.Background(), []string{"-redis-durability", "replica", "-redis-url", redistest.URL(t),
		"-addr", "127.0.0.1:0", "-grpc-port-base", "0"})
	if err == nil || !strings.Contains(err.Error(), "has none connected") || !strings.Contains(err.Error(), "replicaof") {
		t.Fatalf("vigil dev -redis-durability replica on a Redis with no replica = %v, want a refusal naming the fix", err)
	}
}
