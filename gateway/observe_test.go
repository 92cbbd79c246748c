package gateway

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/vigil-dev/vigil/gateway/jsonapi"
	"github.com/vigil-dev/vigil/pkg/server/servertest"
	"github.com/vigil-dev/vigil/pkg/wait"
)

// TestObserveCountsShedRequests serves a stand-in handler through observe: 429 answers count
// as shed. (Sockets are counted by the socket layer, by route only: gateway/socket.)
func TestObserveCountsShedRequests(t *testing.T) {
	t.Parallel()
	inner := http.NewServeMux()
	inner.HandleFunc("GET /shed", func(w http.ResponseWriter, _ *http.Request) {
		jsonapi.WriteError(w, http.StatusTooManyRequests, "Slow down.")
	})
	m, err := newMetrics(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(m.observe(inner))
	defer srv.Close()

	if r := call(t, "GET", srv.URL+"/shed", ""); r.code != http.StatusTooManyRequests {
		t.Fatalf("GET /shed = %d, want 429", r.code)
	}
	if got := testutil.ToFloat64(m.shedRequests.WithLabelValues("rate_limited")); got != 1 {
		t.Fatalf("vigil_gateway_requests_shed_total{reason=rate_limited} = %v after a 429, want 1", got)
	}
}

// TestMetricsTakeNoRoomName: sockets in rooms of many names add no metric series named after
// them: /metrics never shows a room name (names are user input).
func TestMetricsTakeNoRoomName(t *testing.T) {
	t.Parallel()
	g, err := New(context.Background(), Options{Backends: Backends{Chat: servertest.DownAddr(t)}, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(g.Handler())
	t.Cleanup(func() { srv.Close(); g.Close() })
	for i := range 5 {
		if _, code, err := dialWS(t, fmt.Sprintf("%s/websocket?room=metric-secret-%d", srv.URL, i)); err != nil {
			t.Fatalf("socket %d = %d %v", i, code, err)
		}
	}
	wait.Until(t, "5 sockets open", func() bool { return g.sockets.Open() == 5 })
	res := call(t, "GET", srv.URL+"/metrics", "")
	if res.code != http.StatusOK || !strings.Contains(res.raw, `vigil_gateway_sockets{route="chat"}`) {
		t.Fatalf("GET /metrics = %d, want vigil_gateway_sockets by route", res.code)
	}
	if strings.Contains(res.raw, "metric-secret") {
		t.Fatal("a room name is a metric label in /metrics")
	}
}

// TestGatewaysCountOnTheirOwnRegistry: two gateways in one process, each on a Prometheus
// registry of its own (Options.Metrics), count their own requests and sockets, and each one's
// /metrics serves its own registry.
func TestGatewaysCountOnTheirOwnRegistry(t *testing.T) {
	t.Parallel()
	type gw struct {
		g       *Gateway
		prom    *prometheus.Registry
		url     string
		reqs    int
		sockets int
	}
	gws := []*gw{{reqs: 3, sockets: 2}, {reqs: 1, sockets: 1}}
	for _, x := range gws {
		x.prom = prometheus.NewRegistry()
		g, err := New(context.Background(), Options{Backends: Backends{Chat: servertest.DownAddr(t)}, Logger: testLogger(t), Metrics: x.prom})
		if err != nil {
			t.Fatal(err)
		}
		srv := httptest.NewServer(g.Handler())
		t.Cleanup(func() { srv.Close(); g.Close() })
		x.g, x.url = g, srv.URL
	}
	for i, x := range gws {
		for range x.reqs {
			if r := call(t, "GET", x.url+"/openapi.json", ""); r.code != http.StatusOK {
				t.Fatalf("gateway %d: GET /openapi.json = %d, want 200", i, r.code)
			}
		}
		for j := range x.sockets {
			if _, code, err := dialWS(t, fmt.Sprintf("%s/websocket?room=own-%d", x.url, j)); err != nil {
				t.Fatalf("gateway %d: socket %d = %d %v", i, j, code, err)
			}
		}
	}
	for i, x := range gws {
		wait.Until(t, fmt.Sprintf("gateway %d's sockets open", i), func() bool { return x.g.sockets.Open() == x.sockets })
		if got := testutil.ToFloat64(x.g.metrics.httpRequests.WithLabelValues("GET", "200")); got != float64(x.reqs) {
			t.Fatalf("gateway %d: vigil_gateway_http_requests_total{GET,200} = %v, want %d", i, got, x.reqs)
		}
		// A socket's request is counted when its upgrade handler returns, after the client
		// already has its 101.
		wait.For(t, fmt.Sprintf("gateway %d's upgrades counted", i), func() error {
			if got := testutil.ToFloat64(x.g.metrics.httpRequests.WithLabelValues("GET", "101")); got != float64(x.sockets) {
				return fmt.Errorf("vigil_gateway_http_requests_total{GET,101} = %v, want %d", got, x.sockets)
			}
			return nil
		})
		exp := fmt.Sprintf(`
# HELP vigil_gateway_sockets Open WebSocket connections on this gateway, by route (chat, room).
# TYPE vigil_gateway_sockets gauge
vigil_gateway_sockets{route="chat"} %d
`, x.sockets)
		if err := testutil.GatherAndCompare(x.prom, strings.NewReader(exp), "vigil_gateway_sockets"); err != nil {
			t.Fatalf("gateway %d: %v", i, err)
		}
		res := call(t, "GET", x.url+"/metrics", "")
		want := fmt.Sprintf("vigil_gateway_sockets{route=\"chat\"} %d\n", x.sockets)
		if res.code != http.StatusOK || !strings.Contains(res.raw, want) {
			t.Fatalf("gateway %d: GET /metrics = %d without %q:\n%s", i, res.code, want, res.raw)
		}
	}
}
