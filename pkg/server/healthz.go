package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/vigil-dev/vigil/pkg/clock"
)

// clockSyncTimeout bounds New's first samples of the shared clock.
const clockSyncTimeout = 10 * time.Second

// syncClock takes the clock's first samples of Store's TIME, so that no call is answered
// against an unmeasured clock, and logs what they measured.
func (o Options) syncClock() error {
	if o.Clock == nil {
		return nil
	}
	if o.Store == nil {
		return errors.New("server: Options.Clock needs Options.Store, whose TIME it follows")
	}
	ctx, cancel := context.WithTimeout(context.Background(), clockSyncTimeout)
	defer cancel()
	if err := o.Clock.Sync(ctx, clock.RedisTime(o.Store)); err != nil {
		return fmt.Errorf("%s: %w", o.Name, err)
	}
	st := o.Clock.Status()
	o.Logger.Info("clock disciplined to Redis's TIME", "event", "clock_synced", "service", o.Name,
		"offsetSeconds", st.Offset.Seconds(), "errorSeconds", st.Error.Seconds(), "rttSeconds", st.RTT.Seconds())
	return nil
}

// healthz is the replica's own health on the MetricsAddr listener, for an operator or a probe
// that asks one replica rather than a balanced name: 200 while the server is SERVING, 503
// (naming why) while it is not (its Redis does not answer, or it drains). A clock further from
// Redis's TIME than the bound is named under "warning" with status "warning" and 200: the
// replica's decisions are right through the measured offset, so it stays in rotation, but the
// host's clock needs fixing.
func (s *Server) healthz(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), time.Second)
	defer cancel()
	serving := healthpb.HealthCheckResponse_SERVICE_UNKNOWN.String()
	if res, err := s.health.Check(ctx, &healthpb.HealthCheckRequest{}); err == nil {
		serving = res.GetStatus().String()
	}
	body := map[string]any{"status": "ok", "service": s.o.Name, "serving": serving}
	code := http.StatusOK
	if s.o.Clock != nil {
		st := s.o.Clock.Status()
		body["clock"] = map[string]any{
			"synced": st.Synced, "offsetSeconds": st.Offset.Seconds(), "errorSeconds": st.Error.Seconds(),
			"rttSeconds": st.RTT.Seconds(), "sampleAgeSeconds": st.Age.Seconds(),
		}
		if err := s.o.Clock.Check(); err != nil {
			body["status"] = "warning"
			body["warning"] = err.Error() + "."
		}
	}
	if serving != healthpb.HealthCheckResponse_SERVING.String() {
		code = http.StatusServiceUnavailable
		body["status"] = "unavailable"
		body["error"] = fmt.Sprintf("Not ready: %s is %s (its Redis does not answer, or it is draining).", s.o.Name, serving)
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(body)
}
