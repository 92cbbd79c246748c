package gateway

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
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

// TestObserveCountsSocketsPerRoomAndShedRequests serves a stand-in handler through observe:
// sockets are counted per room while open and their series goes when the last one closes;
// 429 and 503 answers count as shed.
func TestObserveCountsSocketsPerRoomAndShedRequests(t *testing.T) {
	t.Parallel()
	inner := http.NewServeMux()
	inner.HandleFunc("GET /shed", func(w http.ResponseWriter, _ *http.Request) { writeError(w, http.StatusTooManyRequests, "Slow down.") })
	inner.HandleFunc("GET /rooms/{code}/websocket", func(w http.ResponseWriter, r *http.Request) {
		c, err := websocket.Accept(w, r, nil)
		if err != nil {
			return
		}
		go func() {
			defer c.CloseNow()
			for {
				if _, _, err := c.Read(context.Background()); err != nil {
					return
				}
			}
		}()
	})
	srv := httptest.NewServer(observe(inner))
	defer srv.Close()

	shed := testutil.ToFloat64(shedRequests.WithLabelValues("rate_limited"))
	if r := call(t, "GET", srv.URL+"/shed", ""); r.code != http.StatusTooManyRequests {
		t.Fatalf("GET /shed = %d, want 429", r.code)
	}
	if got := testutil.ToFloat64(shedRequests.WithLabelValues("rate_limited")); got < shed+1 {
		t.Fatalf("vigil_gateway_requests_shed_total{reason=rate_limited} = %v after a 429, want at least %v", got, shed+1)
	}

	room := map[string]string{"route": "room", "room": "observe-test"}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	u := "ws" + strings.TrimPrefix(srv.URL, "http") + "/rooms/observe-test/websocket"
	var conns []*websocket.Conn
	for range 3 {
		c, _, err := websocket.Dial(ctx, u, nil)
		if err != nil {
			t.Fatalf("dial: %v", err)
		}
		conns = append(conns, c)
	}
	// The server writes 101 before it hijacks the connection, so the count may trail the dial.
	eventually(t, 5*time.Second, func() error {
		if v, _ := gaugeValue(t, "vigil_gateway_room_sockets", room); v != 3 {
			return fmt.Errorf("vigil_gateway_room_sockets{room=observe-test} = %v, want 3", v)
		}
		return nil
	})
	conns[0].Close(websocket.StatusNormalClosure, "")
	eventually(t, 5*time.Second, func() error {
		if v, _ := gaugeValue(t, "vigil_gateway_room_sockets", room); v != 2 {
			return errors.New("room gauge not yet 2")
		}
		return nil
	})
	for _, c := range conns[1:] {
		c.Close(websocket.StatusNormalClosure, "")
	}
	eventually(t, 5*time.Second, func() error {
		if _, ok := gaugeValue(t, "vigil_gateway_room_sockets", room); ok {
			return errors.New("the room's series is still there after its last socket closed")
		}
		return nil
	})
}
