package gateway

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/vigil-dev/vigil/pkg/redistest"
	"github.com/vigil-dev/vigil/pkg/redisx"
	"github.com/vigil-dev/vigil/pkg/server"
	"github.com/vigil-dev/vigil/pkg/server/servertest"
	"github.com/vigil-dev/vigil/pkg/wait"
	"github.com/vigil-dev/vigil/services/reservations/service"
)

func num(t *testing.T, v any) int64 {
	t.Helper()
	n, ok := v.(json.Number)
	if !ok {
		t.Fatalf("%v (%T) is not a JSON number", v, v)
	}
	i, err := n.Int64()
	if err != nil {
		t.Fatalf("%v is not an integer: %v", v, err)
	}
	return i
}

// TestReservationLifecycle runs the lifecycle as a user does, over HTTP through the gateway:
// a 30 s and a 3600 s hold, the service and Redis restarted before the first alarm, the short
// hold expiring exactly once, the long one still held, and replay changing it once.
func TestReservationLifecycle(t *testing.T) {
	t.Parallel()
	rs := redistest.Start(t)
	prefix := redistest.Prefix(t)
	addr := servertest.FreeAddr(t)
	logs := &servertest.LogBuffer{}
	opts := func() service.Options {
		return service.Options{
			Core:     server.Core{GRPCAddr: addr, Redis: redisx.Config{URL: rs.URL(t)}, Prefix: prefix, Logger: slog.New(slog.NewJSONHandler(logs, nil))},
			Replay:   true,
			AlarmLog: logs,
		}
	}
	svc := startReservations(t, opts())
	gw := startGateway(t, Backends{Reservations: addr})

	before := time.Now().UnixMilli()
	short := call(t, "POST", gw.URL+"/reservations/short-hold", `{"ttlSeconds": 30}`)
	long := call(t, "POST", gw.URL+"/reservations/long-hold", `{"ttlSeconds": 3600}`)
	for _, r := range []apiResponse{short, long} {
		if r.code != http.StatusCreated {
			t.Fatalf("create = %d %s, want 201", r.code, r.raw)
		}
		if r.body["status"] != "held" || num(t, r.body["expirationCount"]) != 0 || r.body["expiredAt"] != nil {
			t.Fatalf("created reservation = %s, want held, expirationCount 0, expiredAt null", r.raw)
		}
		if num(t, r.body["alarmAt"]) != num(t, r.body["expiresAt"]) {
			t.Fatalf("alarmAt %v != expiresAt %v", r.body["alarmAt"], r.body["expiresAt"])
		}
	}
	// The service's clock is set to Redis's TIME: it agrees with this process's within its
	// error (milliseconds on loopback), not exactly, so "about now+30s" allows a second.
	if exp := num(t, short.body["expiresAt"]); exp < before+29_000 || exp > time.Now().UnixMilli()+31_000 {
		t.Fatalf("short expiresAt = %d, want about now+30s (%d..)", exp, before+30_000)
	}

	// Restart the service and Redis (AOF on) before the first alarm is due.
	svc.Stop()
	rs.Restart(t)
	svc = startReservations(t, opts())
	_ = svc

	got := call(t, "GET", gw.URL+"/reservations/long-hold", "")
	if got.code != 200 || got.body["status"] != "held" || num(t, got.body["expiresAt"]) != num(t, long.body["expiresAt"]) {
		t.Fatalf("long hold after restart = %d %s, want it held as created", got.code, got.raw)
	}

	shortExpires := num(t, short.body["expiresAt"])
	wait.Within(t, 45*time.Second, "the short hold expired after the restart", func() error {
		got := call(t, "GET", gw.URL+"/reservations/short-hold", "")
		if got.body["status"] != "expired" {
			return fmt.Errorf("short hold = %s, want expired", got.raw)
		}
		return nil
	})
	got = call(t, "GET", gw.URL+"/reservations/short-hold", "")
	if num(t, got.body["expirationCount"]) != 1 || got.body["alarmAt"] != nil {
		t.Fatalf("short hold = %s, want expirationCount 1 and alarmAt null", got.raw)
	}
	if at := num(t, got.body["expiredAt"]); at < shortExpires {
		t.Fatalf("short hold expired at %d, before its expiresAt %d", at, shortExpires)
	}
	fired := logs.Events(map[string]any{"event": "reservation-alarm", "phase": "done", "id": "short-hold", "changed": true})
	if len(fired) != 1 {
		t.Fatalf("short hold expired by %d alarm firings, want exactly 1", len(fired))
	}
	if fired[0]["isRetry"] != false || fired[0]["retryCount"] != float64(0) {
		t.Fatalf("alarm log line = %v, want isRetry false and retryCount 0", fired[0])
	}

	got = call(t, "GET", gw.URL+"/reservations/long-hold", "")
	if got.body["status"] != "held" || num(t, got.body["alarmAt"]) != num(t, long.body["expiresAt"]) {
		t.Fatalf("long hold = %s, want held with its alarm", got.raw)
	}

	replayAt := fmt.Sprintf(`{"now": %d}`, num(t, long.body["expiresAt"])+1)
	for i, wantChanged := range []bool{true, false} {
		r := call(t, "POST", gw.URL+"/reservations/long-hold/replay-alarm", replayAt)
		if r.code != 200 || r.body["changed"] != wantChanged || r.body["status"] != "expired" ||
			num(t, r.body["expirationCount"]) != 1 || r.body["alarmAt"] != nil {
			t.Fatalf("replay #%d = %d %s, want changed %v, expired, expirationCount 1, alarmAt null", i+1, r.code, r.raw, wantChanged)
		}
	}
}

func TestReservationTransitions(t *testing.T) {
	t.Parallel()
	c, prefix := redistest.Client(t)
	_ = c
	svc := startReservations(t, service.Options{Core: testCore(redistest.URL(t), prefix, nil), Replay: true})
	gw := startGateway(t, Backends{Reservations: svc.Addr})

	missing := call(t, "GET", gw.URL+"/reservations/never-made", "")
	if missing.code != 200 || missing.body["reservationId"] != "never-made" || missing.body["status"] != "missing" {
		t.Fatalf("GET never created = %d %s, want 200 missing", missing.code, missing.raw)
	}
	if v, ok := missing.body["alarmAt"]; !ok || v != nil {
		t.Fatalf("missing reservation alarmAt = %v (present %v), want null", v, ok)
	}

	steps := []struct {
		method, path, body string
		code               int
		status, errMsg     string
	}{
		{"POST", "/reservations/never-made/confirm", `{}`, 404, "", "Reservation never-made does not exist; create it first."},
		{"POST", "/reservations/hold-a", `{"ttlSeconds": 60}`, 201, "held", ""},
		{"POST", "/reservations/hold-a/confirm", `{}`, 200, "confirmed", ""},
		{"POST", "/reservations/hold-a/confirm", ``, 200, "confirmed", ""},
		{"POST", "/reservations/hold-a/release", `{}`, 409, "", "Reservation hold-a is confirmed and cannot be released."},
		{"POST", "/reservations/hold-b", `{"ttlSeconds": 60}`, 201, "held", ""},
		{"POST", "/reservations/hold-b/release", `{}`, 200, "released", ""},
		{"POST", "/reservations/hold-b/confirm", `{}`, 409, "", "Reservation hold-b is released and cannot be confirmed."},
		// Re-creating resets the hold, whatever it was.
		{"POST", "/reservations/hold-b", `{"ttlSeconds": 5}`, 201, "held", ""},
		{"POST", "/reservations/hold-b/replay-alarm", fmt.Sprintf(`{"now": %d}`, time.Now().Add(time.Hour).UnixMilli()), 200, "expired", ""},
		{"POST", "/reservations/hold-b/confirm", `{}`, 409, "", "Reservation hold-b is expired and cannot be confirmed."},
	}
	for _, s := range steps {
		r := call(t, s.method, gw.URL+s.path, s.body)
		if r.code != s.code || (s.status != "" && r.body["status"] != s.status) || (s.errMsg != "" && r.body["error"] != s.errMsg) {
			t.Fatalf("%s %s %s = %d %s, want %d status %q error %q", s.method, s.path, s.body, r.code, r.raw, s.code, s.status, s.errMsg)
		}
	}
}

func TestReservationBadInput(t *testing.T) {
	t.Parallel()
	_, prefix := redistest.Client(t)
	svc := startReservations(t, service.Options{Core: testCore(redistest.URL(t), prefix, nil), Replay: true})
	gw := startGateway(t, Backends{Reservations: svc.Addr})

	const (
		ttlErr  = "ttlSeconds must be an integer from 5 through 3600."
		idErr   = "Use a lowercase reservation ID containing 3-40 letters, digits, or hyphens."
		nowErr  = "now must be an integer from 1 through 9007199254740991."
		bodyErr = "Send a JSON request body."
	)
	big := `{"ttlSeconds": 10, "pad": "` + strings.Repeat("x", 70<<10) + `"}`
	tests := []struct {
		name, method, path, body string
		code                     int
		errMsg                   string
	}{
		{"ttl 4", "POST", "/reservations/abc", `{"ttlSeconds": 4}`, 400, ttlErr},
		{"ttl 3601", "POST", "/reservations/abc", `{"ttlSeconds": 3601}`, 400, ttlErr},
		{"ttl 5.5", "POST", "/reservations/abc", `{"ttlSeconds": 5.5}`, 400, ttlErr},
		{"ttl string", "POST", "/reservations/abc", `{"ttlSeconds": "10"}`, 400, ttlErr},
		{"ttl exponent", "POST", "/reservations/abc", `{"ttlSeconds": 1e1}`, 400, ttlErr},
		{"ttl missing", "POST", "/reservations/abc", `{}`, 400, ttlErr},
		{"missing body", "POST", "/reservations/abc", ``, 400, bodyErr},
		{"not JSON", "POST", "/reservations/abc", `ttlSeconds=10`, 400, bodyErr},
		{"trailing garbage", "POST", "/reservations/abc", `{"ttlSeconds": 10} x`, 400, bodyErr},
		{"upper-case id", "POST", "/reservations/ABC", `{"ttlSeconds": 10}`, 400, idErr},
		{"short id", "POST", "/reservations/ab", `{"ttlSeconds": 10}`, 400, idErr},
		{"underscore id", "GET", "/reservations/a_bc", ``, 400, idErr},
		{"long id", "GET", "/reservations/" + strings.Repeat("a", 41), ``, 400, idErr},
		{"hyphen-ended id", "POST", "/reservations/abc-/confirm", `{}`, 400, idErr},
		{"replay now 0", "POST", "/reservations/abc/replay-alarm", `{"now": 0}`, 400, nowErr},
		{"replay now negative", "POST", "/reservations/abc/replay-alarm", `{"now": -5}`, 400, nowErr},
		{"replay now fraction", "POST", "/reservations/abc/replay-alarm", `{"now": 1.5}`, 400, nowErr},
		{"replay now string", "POST", "/reservations/abc/replay-alarm", `{"now": "5"}`, 400, nowErr},
		{"replay now 2^53+1", "POST", "/reservations/abc/replay-alarm", `{"now": 9007199254740993}`, 400, nowErr},
		{"replay now 2^53", "POST", "/reservations/abc/replay-alarm", `{"now": 9007199254740992}`, 400, nowErr},
		{"replay now 1e17", "POST", "/reservations/abc/replay-alarm", `{"now": 1e17}`, 400, nowErr},
		{"replay now 10^17", "POST", "/reservations/abc/replay-alarm", `{"now": 100000000000000000}`, 400, nowErr},
		{"replay now beyond int64", "POST", "/reservations/abc/replay-alarm", `{"now": 99999999999999999999}`, 400, nowErr},
		{"ttl 2^53+1", "POST", "/reservations/abc", `{"ttlSeconds": 9007199254740993}`, 400, ttlErr},
		{"wrong method", "DELETE", "/reservations/abc", ``, 405, "Method not allowed."},
		{"wrong method put", "PUT", "/reservations/abc", `{"ttlSeconds": 10}`, 405, "Method not allowed."},
		{"oversized body", "POST", "/reservations/abc", big, 413, ""},
		{"unknown route", "GET", "/nothing/here", ``, 404, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := call(t, tt.method, gw.URL+tt.path, tt.body)
			if r.code != tt.code {
				t.Fatalf("%s %s = %d %s, want %d", tt.method, tt.path, r.code, r.raw, tt.code)
			}
			msg, _ := r.body["error"].(string)
			if msg == "" || (tt.errMsg != "" && msg != tt.errMsg) {
				t.Fatalf("%s %s error = %q, want %q", tt.method, tt.path, msg, tt.errMsg)
			}
		})
	}
	// Nothing of the refused creates was stored.
	if r := call(t, "GET", gw.URL+"/reservations/abc", ""); r.body["status"] != "missing" {
		t.Fatalf("after refused creates GET abc = %s, want missing", r.raw)
	}
}

func TestReplayDisabledByDefault(t *testing.T) {
	t.Parallel()
	_, prefix := redistest.Client(t)
	svc := startReservations(t, service.Options{Core: testCore(redistest.URL(t), prefix, nil)})
	gw := startGateway(t, Backends{Reservations: svc.Addr})
	r := call(t, "POST", gw.URL+"/reservations/abc/replay-alarm", `{"now": 5}`)
	if r.code != 404 || !strings.Contains(fmt.Sprint(r.body["error"]), "replay is disabled") {
		t.Fatalf("replay without replay enabled = %d %s, want 404 saying replay is disabled", r.code, r.raw)
	}
}

func TestOperationalRoutes(t *testing.T) {
	t.Parallel()
	_, prefix := redistest.Client(t)
	svc := startReservations(t, service.Options{Core: testCore(redistest.URL(t), prefix, nil)})
	gw := startGateway(t, Backends{Reservations: svc.Addr})

	// GET / (JSON for a program, the UI for a browser) is TestRootRedirectsBrowsers'.
	if h := call(t, "GET", gw.URL+"/healthz", ""); h.code != 200 || h.body["status"] != "ok" {
		t.Fatalf("GET /healthz = %d %s, want 200 ok", h.code, h.raw)
	}
	o := call(t, "GET", gw.URL+"/openapi.json", "")
	if o.code != 200 || !strings.Contains(o.raw, "/reservations/{reservationId}") {
		t.Fatalf("GET /openapi.json = %d, want the reservations paths", o.code)
	}
	if m := call(t, "GET", gw.URL+"/metrics", ""); m.code != 200 || !strings.Contains(m.raw, "grpc_server_handled_total") {
		t.Fatalf("GET /metrics = %d, want Prometheus text with grpc metrics", m.code)
	}

	// A backend that is down makes /healthz answer 503.
	svc.Stop()
	wait.For(t, "/healthz 503 with the backend down", func() error {
		if h := call(t, "GET", gw.URL+"/healthz", ""); h.code != 503 {
			return fmt.Errorf("GET /healthz with the backend down = %d, want 503", h.code)
		}
		return nil
	})
}

// TestBackendListIsBalanced gives the gateway two reservations replicas as one backend: calls
// reach both.
func TestBackendListIsBalanced(t *testing.T) {
	t.Parallel()
	_, prefix := redistest.Client(t)
	var logs [2]*servertest.LogBuffer
	var addrs []string
	for i := range logs {
		logs[i] = &servertest.LogBuffer{}
		svc := startReservations(t, service.Options{Core: server.Core{Redis: redisx.Config{URL: redistest.URL(t)}, Prefix: prefix, Logger: slog.New(slog.NewJSONHandler(logs[i], &slog.HandlerOptions{Level: slog.LevelDebug}))}})
		addrs = append(addrs, svc.Addr)
	}
	gw := startGateway(t, Backends{Reservations: strings.Join(addrs, ",")})
	for i := range 20 {
		if r := call(t, "GET", gw.URL+fmt.Sprintf("/reservations/hold-%d", i), ""); r.code != 200 {
			t.Fatalf("GET = %d %s", r.code, r.raw)
		}
	}
	for i, l := range logs {
		if n := len(l.Events(map[string]any{"event": "rpc", "grpc.method": "GetReservation"})); n == 0 {
			t.Fatalf("replica %d served none of 20 calls: the backend list is not balanced", i)
		}
	}
}
