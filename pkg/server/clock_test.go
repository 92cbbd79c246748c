package server

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/vigil-dev/vigil/pkg/prom/promtest"
	"github.com/vigil-dev/vigil/pkg/redistest"
	"github.com/vigil-dev/vigil/pkg/redisx"
	"github.com/vigil-dev/vigil/pkg/wait"
)

// Core's clock: disciplined to Redis's TIME when Now is nil or DisciplineClock is set; an
// injected Now alone is used as it is (the fake clocks of tests).
func TestCoreDisciplinesNowOnlyWhenAsked(t *testing.T) {
	t.Parallel()
	rdb, prefix := redistest.Client(t)
	fixed := time.Unix(1_000_000, 0)
	skewed := func() time.Time { return time.Now().Add(30 * time.Second) }
	for _, tc := range []struct {
		name       string
		core       Core
		discipline bool
	}{
		{"Now nil", Core{}, true},
		{"Now injected", Core{Now: func() time.Time { return fixed }}, false},
		{"Now injected, DisciplineClock", Core{Now: skewed, DisciplineClock: true}, true},
	} {
		tc.core.Redis, tc.core.Prefix = redisx.Config{URL: redistest.URL(t)}, prefix
		tc.core.Registerer, tc.core.Logger = prometheus.NewRegistry(), slog.New(slog.NewJSONHandler(io.Discard, nil))
		c, err := tc.core.WithDefaults("probe")
		if err != nil {
			t.Fatal(err)
		}
		s, err := New(c.Server("vigil.test.Probe", rdb))
		if err != nil {
			t.Fatalf("%s: New = %v", tc.name, err)
		}
		_ = s.lis.Close()
		if !tc.discipline {
			if c.clock != nil || !c.Now().Equal(fixed) {
				t.Errorf("%s: Now = %v, clock %v; want the injected clock as it is", tc.name, c.Now(), c.clock)
			}
			continue
		}
		before := c.Now()
		shared := redistest.Time(t, rdb)
		after := c.Now()
		slack := c.clock.Status().Error + time.Microsecond
		if c.clock == nil || shared.Before(before.Add(-slack)) || shared.After(after.Add(slack)) {
			t.Errorf("%s: Redis TIME %v outside Now's [%v, %v] ± %v", tc.name, shared, before, after, slack)
		}
	}
}

// A replica whose clock runs 30s ahead says so: a warning in its log, the gauge, and its
// /healthz naming the offset (200: its decisions are right through the offset). One in step
// answers "ok".
func TestHealthzNamesASkewedClock(t *testing.T) {
	t.Parallel()
	rdb, prefix := redistest.Client(t)
	for _, tc := range []struct {
		skew   time.Duration
		status string
	}{{30 * time.Second, "warning"}, {-30 * time.Second, "warning"}, {0, "ok"}} {
		var log bytes.Buffer
		reg := prometheus.NewRegistry()
		c, err := Core{
			Redis: redisx.Config{URL: redistest.URL(t)}, Prefix: prefix, MetricsAddr: freeAddr(t), Registerer: reg,
			Logger:          slog.New(slog.NewJSONHandler(&log, nil)),
			Now:             func() time.Time { return time.Now().Add(tc.skew) },
			DisciplineClock: true,
		}.WithDefaults("probe")
		if err != nil {
			t.Fatal(err)
		}
		s, err := New(c.Server("vigil.test.Probe", rdb))
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		served := make(chan error, 1)
		go func() { served <- s.Serve(ctx) }()

		var body map[string]any
		wait.For(t, "/healthz answers", func() error {
			res, err := http.Get("http://" + c.MetricsAddr + "/healthz")
			if err != nil {
				return err
			}
			defer res.Body.Close()
			body = nil
			if err := json.NewDecoder(res.Body).Decode(&body); err != nil {
				return err
			}
			if res.StatusCode != http.StatusOK || body["serving"] != "SERVING" {
				return fmt.Errorf("GET /healthz = %d %v, want 200 SERVING", res.StatusCode, body)
			}
			return nil
		})
		cancel()
		if err := <-served; err != nil {
			t.Fatal(err)
		}
		clk, _ := body["clock"].(map[string]any)
		offset, _ := clk["offsetSeconds"].(float64)
		if body["status"] != tc.status || clk["synced"] != true || offset+tc.skew.Seconds() > 0.05 || offset+tc.skew.Seconds() < -0.05 {
			t.Errorf("skew %v: /healthz = %v; want status %q and clock.offsetSeconds about %v", tc.skew, body, tc.status, -tc.skew.Seconds())
		}
		if g := gauge(t, reg, "vigil_clock_offset_seconds", "probe"); g != offset {
			t.Errorf("skew %v: vigil_clock_offset_seconds = %v, want %v as /healthz says", tc.skew, g, offset)
		}
		warning, _ := body["warning"].(string)
		warned := strings.Contains(log.String(), `"event":"clock_offset"`)
		if tc.skew == 0 {
			if warning != "" || warned {
				t.Errorf("skew 0: warning %q, logged %v; want neither", warning, warned)
			}
			continue
		}
		dir := map[bool]string{true: "ahead of", false: "behind"}[tc.skew > 0]
		if !strings.Contains(warning, "30s "+dir+" Redis's TIME") || !warned {
			t.Errorf("skew %v: /healthz warning %q, log warned %v; want both naming 30s %s", tc.skew, warning, warned, dir)
		}
	}
}

// gauge is the value of reg's gauge name for service.
func gauge(t *testing.T, reg *prometheus.Registry, name, service string) float64 {
	t.Helper()
	for _, m := range promtest.Series(t, reg, name, map[string]string{"service": service}) {
		return m.GetGauge().GetValue()
	}
	t.Fatalf("no %s{service=%q} in the registry", name, service)
	return 0
}
