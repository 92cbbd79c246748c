package gateway

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// gaugeValue reads one series of a gauge from the default registry; ok is false when the
// series does not exist.
func gaugeValue(t *testing.T, name string, labels map[string]string) (v float64, ok bool) {
	t.Helper()
	mfs, err := prometheus.DefaultGatherer.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	series:
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				if want, ok := labels[lp.GetName()]; ok && want != lp.GetValue() {
					continue series
				}
			}
			return m.GetGauge().GetValue(), true
		}
	}
	return 0, false
}

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
