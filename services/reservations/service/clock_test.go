package service

import (
	"context"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	reservationsv1 "github.com/vigil-dev/vigil/pkg/api/vigil/reservations/v1"
	"github.com/vigil-dev/vigil/pkg/redistest"
	"github.com/vigil-dev/vigil/pkg/redisx"
	"github.com/vigil-dev/vigil/pkg/server"
	"github.com/vigil-dev/vigil/pkg/wait"
)

// Two replicas on one Redis, one of them with a clock 30s ahead (and, separately, 30s behind):
// every hold, whichever replica created it and whichever expires it, lasts its whole TTL by
// Redis's clock and expires once, never before its expiresAt. Without the shared clock the
// replica ahead expires holds 25s early, and holds the replica behind creates end 30s early.
func TestSkewedReplicaExpiresNoHoldEarly(t *testing.T) {
	t.Parallel()
	rdb, prefix := redistest.Client(t)
	for _, skew := range []time.Duration{30 * time.Second, -30 * time.Second} {
		t.Run(fmt.Sprintf("skew %v", skew), func(t *testing.T) {
			t.Parallel()
			prefix := fmt.Sprintf("%s-%d", prefix, skew/time.Second)
			replica := func(base func() time.Time) reservationsv1.ReservationServiceClient {
				return client(t, start(t, Options{Core: server.Core{
					Redis: redisx.Config{URL: redistest.URL(t)}, Prefix: prefix, Registerer: prometheus.NewRegistry(),
					Logger: slog.New(slog.DiscardHandler), Now: base, DisciplineClock: true,
				}, Shards: 2, Lease: 2 * time.Second}))
			}
			inStep := replica(time.Now)
			skewed := replica(func() time.Time { return time.Now().Add(skew) })
			ctx := context.Background()
			redisNow := func() time.Time { return redistest.Time(t, rdb) }
			const ttl = 5 // seconds, the shortest hold
			type hold struct {
				id      string
				created time.Time // Redis's time just before the create
				r       *reservationsv1.Reservation
			}
			var holds []hold
			for name, c := range map[string]reservationsv1.ReservationServiceClient{"in-step": inStep, "skewed": skewed} {
				id := "by-" + name
				before := redisNow()
				res, err := c.CreateReservation(ctx, &reservationsv1.CreateReservationRequest{ReservationId: id, TtlSeconds: ttl})
				if err != nil {
					t.Fatalf("create %s: %v", id, err)
				}
				holds = append(holds, hold{id, before, res.GetReservation()})
			}
			for _, h := range holds {
				// The replicas' clocks agree with Redis's within their error bound (well under
				// 50ms on one host); expiresAt is whole ms.
				if lo, exp := h.created.Add(ttl*time.Second-50*time.Millisecond), time.UnixMilli(h.r.GetExpiresAt()); exp.Before(lo) {
					t.Errorf("%s: expiresAt %v is before created (Redis) + TTL − 50ms = %v: the hold was cut short", h.id, exp, lo)
				}
			}
			// Every poll reads each hold not yet seen expired; seenAt is Redis's time just after
			// the read that first saw it expired. A hold expired early is seen before its
			// expiresAt.
			seenAt := map[string]time.Time{}
			final := map[string]*reservationsv1.Reservation{}
			wait.For(t, "every hold expired", func() error {
				for _, h := range holds {
					if _, ok := seenAt[h.id]; ok {
						continue
					}
					res, err := inStep.GetReservation(ctx, &reservationsv1.GetReservationRequest{ReservationId: h.id})
					if err != nil {
						return err
					}
					if res.GetReservation().GetStatus() == "expired" {
						seenAt[h.id], final[h.id] = redisNow(), res.GetReservation()
					}
				}
				if len(seenAt) < len(holds) {
					return fmt.Errorf("%d of %d holds expired", len(seenAt), len(holds))
				}
				return nil
			})
			for _, h := range holds {
				got := final[h.id]
				expiresAt := time.UnixMilli(got.GetExpiresAt())
				if seenAt[h.id].Before(expiresAt) {
					t.Errorf("%s: seen expired at %v (Redis), %v before its expiresAt %v", h.id, seenAt[h.id], expiresAt.Sub(seenAt[h.id]), expiresAt)
				}
				if expiredAt := time.UnixMilli(got.GetExpiredAt()); got.GetExpirationCount() != 1 || expiredAt.Before(expiresAt) {
					t.Errorf("%s: expirationCount %d, expiredAt %v, expiresAt %v; want once, not before expiresAt",
						h.id, got.GetExpirationCount(), expiredAt, expiresAt)
				}
			}
		})
	}
}
