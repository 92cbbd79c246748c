package gateway

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/vigil-dev/vigil/pkg/redistest"
	"github.com/vigil-dev/vigil/pkg/redisx"
	"github.com/vigil-dev/vigil/pkg/server"
	locksservice "github.com/vigil-dev/vigil/services/locks/service"
	"github.com/vigil-dev/vigil/services/reservations/service"
)

// TestUnaryRoutesMatchTheRuntime drives the unary routes (unary.go) and the grpc-gateway
// runtime with the same requests, each through its own gateway in front of its own real
// services (same clock, own Redis prefix, so both see the same state at every step), and
// requires the same status, Content-Type and body: the direct path is the runtime's contract,
// good answers and refusals alike.
func TestUnaryRoutesMatchTheRuntime(t *testing.T) {
	t.Parallel()
	url, prefix := redistest.URL(t), redistest.Prefix(t)
	frozen := time.UnixMilli(1_800_000_000_123)
	now := func() time.Time { return frozen }
	handlers := map[string]http.Handler{}
	for _, side := range []string{"unary", "runtime"} {
		res := startReservations(t, service.Options{Core: server.Core{Redis: redisx.Config{URL: url}, Prefix: prefix + "-r-" + side, Now: now}})
		locks := startLocks(t, locksservice.Options{Core: server.Core{Redis: redisx.Config{URL: url}, Prefix: prefix + "-k-" + side, Now: now, Logger: testLogger(t)}})
		g, err := New(context.Background(), Options{Backends: Backends{Reservations: res.Addr, Locks: locks.Addr}, Logger: testLogger(t)})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(g.Close)
		handlers[side] = g.Handler()
		if side == "runtime" {
			handlers[side] = g.runtime
		}
	}

	long := strings.Repeat("x", 300)
	steps := []struct{ method, path, body string }{
		// Reservations: the lifecycle, then every way to get a write wrong.
		{"POST", "/reservations/hold-1", `{"ttlSeconds":60}`},
		{"POST", "/reservations/hold-1", `{"ttlSeconds":60}`},
		{"POST", "/reservations/hold-1", `{"ttlSeconds":61}`},
		{"POST", "/reservations/hold-1/confirm", ``},
		{"POST", "/reservations/hold-1/confirm", `{}`},
		{"POST", "/reservations/hold-1/release", `{}`},
		{"POST", "/reservations/hold-2", `{"ttlSeconds":30,"reservationId":"from-the-body"}`},
		{"POST", "/reservations/hold-2/release", ``},
		{"POST", "/reservations/hold-2/confirm", ``},
		{"POST", "/reservations/missing/confirm", ``},
		{"POST", "/reservations/missing/release", `{}`},
		{"POST", "/reservations/hold-3", ``},
		{"POST", "/reservations/hold-3", `{}`},
		{"POST", "/reservations/hold-3", `[]`},
		{"POST", "/reservations/hold-3", `{"ttlSeconds":"10"}`},
		{"POST", "/reservations/hold-3", `{"ttlSeconds":5.5}`},
		{"POST", "/reservations/hold-3", `{"ttlSeconds":1e17}`},
		{"POST", "/reservations/hold-3", `{"ttlSeconds":4}`},
		{"POST", "/reservations/hold-3", `{"ttlSeconds":3601}`},
		{"POST", "/reservations/hold-3", `{"ttlSeconds":10}}`},
		{"POST", "/reservations/hold-3", `{"ttlSeconds":10,"unknown":true}`},
		{"POST", "/reservations/hold-3", "{\"ttlSeconds\":10,\"x\":\"\xff\"}"},
		{"POST", "/reservations/hold-3/confirm", `{"x":`},
		{"POST", "/reservations/has%20space", `{"ttlSeconds":10}`},
		{"POST", "/reservations/a%2Fb", `{"ttlSeconds":10}`},
		{"POST", "/reservations/" + long, `{"ttlSeconds":10}`},
		// Locks: take, renew, give back, and the refusals.
		{"POST", "/locks/orders%2F42/acquire", `{"owner":"alice","ttlMs":30000}`},
		{"POST", "/locks/orders%2F42/acquire", `{"owner":"alice","ttlMs":30000}`},
		{"POST", "/locks/orders%2F42/acquire", `{"owner":"bob","ttlMs":30000}`},
		{"POST", "/locks/orders%2F42/renew", `{"owner":"alice","ttlMs":60000}`},
		{"POST", "/locks/orders%2F42/renew", `{"owner":"bob","ttlMs":60000}`},
		{"POST", "/locks/orders%2F42/release", `{"owner":"bob"}`},
		{"POST", "/locks/orders%2F42/release", `{"owner":"alice"}`},
		{"POST", "/locks/orders%2F42/release", `{"owner":"alice"}`},
		{"POST", "/locks/%C3%A9t%C3%A9/acquire", `{"owner":"zoë","ttlMs":100}`},
		{"POST", "/locks/job/acquire", `{"owner":"alice"}`},
		{"POST", "/locks/job/acquire", `{"ttlMs":1000}`},
		{"POST", "/locks/job/acquire", `{"owner":"","ttlMs":1000}`},
		{"POST", "/locks/job/acquire", `{"owner":"alice","ttlMs":99}`},
		{"POST", "/locks/job/acquire", `{"owner":"alice","ttlMs":"1000"}`},
		{"POST", "/locks/job/acquire", `{"owner":7,"ttlMs":1000}`},
		{"POST", "/locks/job/acquire", `{"owner":"alice","ttlMs":1000,"waitMs":60001}`},
		{"POST", "/locks/job/acquire", `{"owner":"a\u0007b","ttlMs":1000}`},
		{"POST", "/locks/job/acquire", `{"owner":"` + long + `","ttlMs":1000}`},
		{"POST", "/locks/job/renew", `{"owner":"alice"}`},
		{"POST", "/locks/job/release", ``},
		{"POST", "/locks/job/release", `{"owner":"nobody"}`},
		{"POST", "/locks/" + long + "/acquire", `{"owner":"alice","ttlMs":1000}`},
	}
	for i, s := range steps {
		var got [2]*httptest.ResponseRecorder
		for j, side := range []string{"unary", "runtime"} {
			req := httptest.NewRequest(s.method, s.path, strings.NewReader(s.body))
			if s.body == "" {
				req = httptest.NewRequest(s.method, s.path, http.NoBody)
			}
			req.Header.Set("Content-Type", "application/json")
			rec := httptest.NewRecorder()
			handlers[side].ServeHTTP(rec, req)
			got[j] = rec
		}
		u, r := got[0], got[1]
		ub, _ := io.ReadAll(u.Body)
		rb, _ := io.ReadAll(r.Body)
		// A fencing token is max(counter + 1, Redis TIME in µs) (docs/LOCKS.md): the two sides'
		// tokens are read from one Redis at different microseconds, so only their presence and
		// place are compared.
		ub, rb = fencingToken.ReplaceAll(ub, []byte(`"fencingToken":TOKEN`)), fencingToken.ReplaceAll(rb, []byte(`"fencingToken":TOKEN`))
		if u.Code != r.Code || u.Header().Get("Content-Type") != r.Header().Get("Content-Type") || string(ub) != string(rb) {
			t.Errorf("step %d %s %s %s:\n unary   %d %s %s\n runtime %d %s %s", i, s.method, s.path, s.body,
				u.Code, u.Header().Get("Content-Type"), ub, r.Code, r.Header().Get("Content-Type"), rb)
		}
		if i < 2 && u.Code != http.StatusCreated {
			t.Fatalf("step %d: the first create got %d %s, want 201 (the comparison would prove nothing)", i, u.Code, ub)
		}
	}
}

// fencingToken matches a positive fencing token in an answer.
var fencingToken = regexp.MustCompile(`"fencingToken":[1-9][0-9]*`)
