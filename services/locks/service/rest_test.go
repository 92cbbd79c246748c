package service_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/vigil-dev/vigil/gateway"
	"github.com/vigil-dev/vigil/pkg/wait"
	"github.com/vigil-dev/vigil/services/locks/service"
)

// startREST serves the gateway in-process in front of the test's lock service.
func startREST(t *testing.T, e *env) *httptest.Server {
	t.Helper()
	g, err := gateway.New(context.Background(), gateway.Options{Backends: gateway.Backends{Locks: e.addr}, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatalf("gateway.New: %v", err)
	}
	srv := httptest.NewServer(g.Handler())
	t.Cleanup(func() { srv.Close(); g.Close() })
	return srv
}

// call sends method path body and returns the status and the decoded JSON object.
func call(t *testing.T, srv *httptest.Server, method, path, body string) (int, map[string]any) {
	t.Helper()
	return callCtx(t, context.Background(), srv, method, path, body)
}

func callCtx(t *testing.T, ctx context.Context, srv *httptest.Server, method, path, body string) (int, map[string]any) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, method, srv.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	res, err := srv.Client().Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatalf("%s %s answered %d with non-JSON %q", method, path, res.StatusCode, raw)
	}
	return res.StatusCode, m
}

// num reads a JSON number field; it fails the test when the field is not a number.
func num(t *testing.T, m map[string]any, field string) int64 {
	t.Helper()
	f, ok := m[field].(float64)
	if !ok {
		t.Fatalf("%s = %#v in %v, want a JSON number", field, m[field], m)
	}
	return int64(f)
}

func TestRESTRoutes(t *testing.T) {
	t.Parallel()
	clk := newTestClock()
	e := startLocks(t, withClock(clk))
	srv := startREST(t, e)
	before := clk.Now().UnixMilli()

	code, a := call(t, srv, "POST", "/locks/reports/acquire", `{"owner":"alice"}`)
	if code != 200 || a["acquired"] != true || a["holder"] != nil {
		t.Fatalf("POST /locks/reports/acquire = %d %v, want 200 acquired, holder null", code, a)
	}
	token := num(t, a, "fencingToken")
	if exp := num(t, a, "expiresAt"); exp != before+30000 {
		t.Errorf("expiresAt = %d, want now + 30000 (the default ttl)", exp)
	}

	code, b := call(t, srv, "POST", "/locks/reports/acquire", `{"owner":"bob","ttlMs":1000,"waitMs":0}`)
	if code != 200 || b["acquired"] != false || b["holder"] != "alice" || num(t, b, "fencingToken") != token {
		t.Errorf("acquire by bob = %d %v, want 200 acquired false, holder alice, her token %d", code, b, token)
	}

	code, r := call(t, srv, "POST", "/locks/reports/renew", `{"owner":"bob"}`)
	if code != 200 || r["renewed"] != false || r["expiresAt"] != nil {
		t.Errorf("renew by bob = %d %v, want 200 renewed false, expiresAt null", code, r)
	}
	code, r = call(t, srv, "POST", "/locks/reports/renew", `{"owner":"alice","ttlMs":60000}`)
	if code != 200 || r["renewed"] != true || num(t, r, "expiresAt") != before+60000 {
		t.Errorf("renew by alice = %d %v, want 200 renewed, expiresAt now + 60000", code, r)
	}

	code, g := call(t, srv, "GET", "/locks/reports", "")
	if code != 200 || g["resource"] != "reports" || g["held"] != true || g["owner"] != "alice" || num(t, g, "fencingToken") != token {
		t.Errorf("GET /locks/reports = %d %v, want held by alice with token %d", code, g, token)
	}

	code, rel := call(t, srv, "POST", "/locks/reports/release", `{"owner":"bob"}`)
	if code != 200 || rel["released"] != false {
		t.Errorf("release by bob = %d %v, want 200 released false", code, rel)
	}
	code, rel = call(t, srv, "POST", "/locks/reports/release", `{"owner":"alice"}`)
	if code != 200 || rel["released"] != true {
		t.Errorf("release by alice = %d %v, want 200 released true", code, rel)
	}
	code, g = call(t, srv, "GET", "/locks/reports", "")
	want := map[string]any{"resource": "reports", "held": false, "owner": nil, "fencingToken": nil, "expiresAt": nil}
	if code != 200 || len(g) != len(want) {
		t.Errorf("GET /locks/reports after release = %d %v, want %v", code, g, want)
	}
	for k, v := range want {
		if g[k] != v {
			t.Errorf("GET /locks/reports after release: %s = %v, want %v", k, g[k], v)
		}
	}
}

func TestRESTWaitAndDisconnect(t *testing.T) {
	t.Parallel()
	e := startLocks(t)
	srv := startREST(t, e)
	call(t, srv, "POST", "/locks/printer/acquire", `{"owner":"holder"}`)

	// A waiter whose HTTP client goes away leaves the queue.
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		req, _ := http.NewRequestWithContext(ctx, "POST", srv.URL+"/locks/printer/acquire", strings.NewReader(`{"owner":"gone","waitMs":30000}`))
		if res, err := srv.Client().Do(req); err == nil {
			res.Body.Close()
		}
	}()
	wait.Until(t, "the REST waiter to queue", func() bool { return e.queueLen(t, "printer") == 1 })
	cancel()
	<-done
	wait.Until(t, "the REST waiter to leave the queue", func() bool { return e.queueLen(t, "printer") == 0 })

	// A waiter that stays gets the lock when it is released.
	got := make(chan map[string]any, 1)
	go func() {
		_, m := call(t, srv, "POST", "/locks/printer/acquire", `{"owner":"stays","waitMs":30000}`)
		got <- m
	}()
	wait.Until(t, "the second REST waiter to queue", func() bool { return e.queueLen(t, "printer") == 1 })
	call(t, srv, "POST", "/locks/printer/release", `{"owner":"holder"}`)
	if m := <-got; m["acquired"] != true {
		t.Errorf("waiting acquire = %v, want acquired after the release", m)
	}
}

func TestRESTBadInput(t *testing.T) {
	t.Parallel()
	e := startLocks(t)
	srv := startREST(t, e)
	const (
		msgName  = "resource must be 1 to 256 bytes of UTF-8 text without control characters."
		msgOwner = "owner must be 1 to 256 bytes of UTF-8 text without control characters."
		msgTTL   = "ttlMs must be an integer from 100 through 3600000."
		msgWait  = "waitMs must be an integer from 0 through 60000."
	)
	for _, tc := range []struct {
		method, path, body string
		code               int
		msg                string
	}{
		{"POST", "/locks/bad%0Aname/acquire", `{"owner":"o"}`, 400, msgName},
		{"POST", "/locks/" + strings.Repeat("x", 257) + "/acquire", `{"owner":"o"}`, 400, msgName},
		{"GET", "/locks/tab%09name", "", 400, msgName},
		{"POST", "/locks/abc/acquire", `{}`, 400, msgOwner},
		{"POST", "/locks/abc/acquire", `{"owner":""}`, 400, msgOwner},
		{"POST", "/locks/abc/acquire", `{"owner":7}`, 400, msgOwner},
		{"POST", "/locks/abc/acquire", `{"owner":"` + strings.Repeat("x", 257) + `"}`, 400, msgOwner},
		{"POST", "/locks/abc/release", `{"owner":"tab\there"}`, 400, msgOwner},
		{"POST", "/locks/abc/acquire", `{"owner":"o","ttlMs":99}`, 400, msgTTL},
		{"POST", "/locks/abc/acquire", `{"owner":"o","ttlMs":3600001}`, 400, msgTTL},
		{"POST", "/locks/abc/acquire", `{"owner":"o","ttlMs":"1000"}`, 400, msgTTL},
		{"POST", "/locks/abc/acquire", `{"owner":"o","ttlMs":1000.5}`, 400, msgTTL},
		{"POST", "/locks/abc/renew", `{"owner":"o","ttlMs":0}`, 400, msgTTL},
		{"POST", "/locks/abc/acquire", `{"owner":"o","waitMs":-1}`, 400, msgWait},
		{"POST", "/locks/abc/acquire", `{"owner":"o","waitMs":60001}`, 400, msgWait},
		{"POST", "/locks/abc/acquire", `{"owner":"o","waitMs":true}`, 400, msgWait},
		{"POST", "/locks/abc/acquire", ``, 400, "Send a JSON request body."},
		{"POST", "/locks/abc/acquire", `{"owner":`, 400, "Send a JSON request body."},
		{"DELETE", "/locks/abc", "", 405, "Method not allowed."},
	} {
		code, m := call(t, srv, tc.method, tc.path, tc.body)
		if code != tc.code || m["error"] != tc.msg {
			t.Errorf("%s %s %s = %d %v, want %d {\"error\": %q}", tc.method, tc.path, tc.body, code, m, tc.code, tc.msg)
		}
	}
	keys, _ := e.rdb.Keys(context.Background(), e.prefix+"*:lock:*").Result()
	if len(keys) != 0 {
		t.Errorf("bad requests stored %v", keys)
	}
}

// A resource travels percent-encoded in the path ("/locks/orders%2F42/acquire"), and GET
// names it as written.
func TestRESTNamesInPaths(t *testing.T) {
	t.Parallel()
	e := startLocks(t)
	srv := startREST(t, e)
	for _, name := range []string{"orders/42", "Order:42", "report.daily", "user@example.com", "日報", "{x}", "100%", "a b", "a/b/c"} {
		path := "/locks/" + url.PathEscape(name)
		code, a := call(t, srv, "POST", path+"/acquire", `{"owner":"worker/7"}`)
		if code != 200 || a["acquired"] != true {
			t.Errorf("POST %s/acquire = %d %v, want 200 acquired", path, code, a)
			continue
		}
		code, g := call(t, srv, "GET", path, "")
		if code != 200 || g["resource"] != name || g["owner"] != "worker/7" {
			t.Errorf("GET %s = %d %v, want resource %q held by worker/7", path, code, g, name)
		}
	}
}

// The gateway relays REST lock writes over session streams. A lock service replica that drains
// under REST traffic costs its callers nothing: calls in flight are answered, waiters it took
// out of their queues are sent again to the other replica and get their locks, and the calls
// that follow go to the other replica. Nothing is answered 5xx.
func TestLockWritesSurviveADrain(t *testing.T) {
	t.Parallel()
	e := startLocks(t) // replica B, which stays
	addrA, stopA := e.stoppableReplica(t, func(o *service.Options) { o.Registerer, o.Replica = prometheus.NewRegistry(), "drainer" })
	t.Cleanup(stopA)
	g, err := gateway.New(context.Background(), gateway.Options{Backends: gateway.Backends{Locks: addrA + "," + e.addr}, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatalf("gateway.New: %v", err)
	}
	srv := httptest.NewServer(g.Handler())
	t.Cleanup(func() { srv.Close(); g.Close() })
	// Reads ride unary calls, round-robin: after a few, both replicas are connected and the
	// relay's sessions open on both.
	for range 20 {
		if code, m := call(t, srv, "GET", "/locks/warm-up", ""); code != 200 {
			t.Fatalf("GET /locks/warm-up = %d %v", code, m)
		}
	}

	// Waiters, one per lock, until one waits on the replica that will drain.
	type answer struct {
		code int
		m    map[string]any
	}
	var waiters []chan answer
	onA := false
	for i := 0; !onA; i++ {
		if i == 16 {
			t.Fatal("16 waiters, none on the replica that drains: the relay's sessions are not spread over the replicas")
		}
		r := fmt.Sprintf("drain-rest-%d", i)
		acquire(t, e.locks, r, "holder", 30000, 0)
		got := make(chan answer, 1)
		waiters = append(waiters, got)
		go func() {
			code, m := call(t, srv, "POST", "/locks/"+r+"/acquire", `{"owner":"waiter","waitMs":30000}`)
			got <- answer{code, m}
		}()
		wait.Until(t, r+"'s waiter to queue", func() bool { return e.queueLen(t, r) == 1 })
		onA = strings.Contains(strings.Join(e.queue(t, r), " "), "\ndrainer-")
	}

	// REST pairs from four callers, through the drain and after it.
	var pairs atomic.Int64
	failures := make(chan string, 100)
	stopLoad := make(chan struct{})
	var load sync.WaitGroup
	for c := range 4 {
		load.Add(1)
		go func() {
			defer load.Done()
			r := fmt.Sprintf("/locks/drain-load-%d", c)
			for {
				select {
				case <-stopLoad:
					return
				default:
				}
				if code, m := call(t, srv, "POST", r+"/acquire", `{"owner":"loader"}`); code != 200 || m["acquired"] != true {
					failures <- fmt.Sprintf("acquire: %d %v", code, m)
					return
				}
				if code, m := call(t, srv, "POST", r+"/release", `{"owner":"loader"}`); code != 200 || m["released"] != true {
					failures <- fmt.Sprintf("release: %d %v", code, m)
					return
				}
				pairs.Add(1)
			}
		}()
	}
	wait.Until(t, "REST pairs before the drain", func() bool { return pairs.Load() >= 20 })
	stopA()
	after := pairs.Load()
	wait.Until(t, "REST pairs after the drain", func() bool { return pairs.Load() >= after+50 || len(failures) > 0 })
	close(stopLoad)
	load.Wait()
	close(failures)
	for f := range failures {
		t.Errorf("REST lock pair during a replica drain: %s, want 200 and success", f)
	}

	for i := range waiters {
		r := fmt.Sprintf("drain-rest-%d", i)
		if !release(t, e.locks, r, "holder") {
			t.Fatalf("holder of %s lost it", r)
		}
	}
	for i, got := range waiters {
		if a := <-got; a.code != 200 || a.m["acquired"] != true {
			t.Errorf("waiter %d across the drain = %d %v, want 200 acquired", i, a.code, a.m)
		}
	}
}
