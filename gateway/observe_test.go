package gateway

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/vigil-dev/vigil/pkg/wait"
)

// TestObserveCountsShedRequests serves a stand-in handler through observe: 429 answers count
// as shed. (Sockets are counted by the socket layer, by route only: gateway/socket.)
func TestObserveCountsShedRequests(t *testing.T) {
	t.Parallel()
	inner := http.NewServeMux()
	inner.HandleFunc("GET /shed", func(w http.ResponseWriter, _ *http.Request) { writeError(w, http.StatusTooManyRequests, "Slow down.") })
	srv := httptest.NewServer(observe(inner))
	defer srv.Close()

	shed := testutil.ToFloat64(shedRequests.WithLabelValues("rate_limited"))
	if r := call(t, "GET", srv.URL+"/shed", ""); r.code != http.StatusTooManyRequests {
		t.Fatalf("GET /shed = %d, want 429", r.code)
	}
	if got := testutil.ToFloat64(shedRequests.WithLabelValues("rate_limited")); got < shed+1 {
		t.Fatalf("vigil_gateway_requests_shed_total{reason=rate_limited} = %v after a 429, want at least %v", got, shed+1)
	}
}

// TestMetricsTakeNoRoomName: sockets in rooms of many names add no metric series named after
// them: /metrics never shows a room name (names are user input).
func TestMetricsTakeNoRoomName(t *testing.T) {
	t.Parallel()
	g, err := New(context.Background(), Options{Backends: Backends{Chat: freeAddr(t)}, Logger: testLogger(t)})
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
