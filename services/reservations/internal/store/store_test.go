package store

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/vigil-dev/vigil/pkg/alarm"
	"github.com/vigil-dev/vigil/pkg/redistest"
	"github.com/vigil-dev/vigil/services/reservations/internal/domain"
)

func TestMain(m *testing.M) { redistest.Main(m) }

func newStore(t *testing.T) *Store {
	t.Helper()
	rdb, prefix := redistest.Universal(t) // a Redis Cluster when VIGIL_TEST_REDIS_CLUSTER is set
	q, err := alarm.New(rdb, alarm.Options{Prefix: prefix, Namespace: "reservations", Shards: 4})
	if err != nil {
		t.Fatal(err)
	}
	s, err := New(rdb, Options{Queue: q})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestScriptsMatchDomain drives the Lua scripts and the Go state machine with the same random
// operations and requires the same state and outcome after every step.
func TestScriptsMatchDomain(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(7, 11))
	ids := []string{"hold-a", "hold-b", "hold-c"}
	twins := map[string]*domain.Reservation{}
	now := int64(1_700_000_000_000)

	for step := range 600 {
		id := ids[rng.IntN(len(ids))]
		now += int64(rng.IntN(4000))
		twin, ok := twins[id]
		if !ok {
			twin = &domain.Reservation{ID: id, Status: domain.Missing}
			twins[id] = twin
		}
		var got domain.Reservation
		var err, wantErr error
		op := rng.IntN(4)
		switch op {
		case 0:
			ttl := time.Duration(5+rng.IntN(10)) * time.Second
			got, err = s.Create(ctx, id, time.UnixMilli(now), ttl)
			*twin = domain.New(id, time.UnixMilli(now), ttl)
		case 1:
			var changed bool
			got, changed, err = s.Expire(ctx, id, time.UnixMilli(now))
			wantChanged := twin.Status != domain.Missing && twin.Expire(time.UnixMilli(now))
			if err == nil && changed != wantChanged {
				t.Fatalf("step %d: Expire(%s, %d) changed = %v, want %v", step, id, now, changed, wantChanged)
			}
		case 2, 3:
			to := domain.Confirmed
			if op == 3 {
				to = domain.Released
			}
			got, err = s.Settle(ctx, id, to, time.UnixMilli(now))
			wantErr = twin.Settle(to, time.UnixMilli(now))
			if !sameKind(err, wantErr) {
				t.Fatalf("step %d: Settle(%s, %s) error = %v, want %v", step, id, to, err, wantErr)
			}
		}
		if err != nil && wantErr == nil {
			t.Fatalf("step %d: op %d on %s: %v", step, op, id, err)
		}
		if got != *twin {
			t.Fatalf("step %d: op %d on %s: store = %+v, domain = %+v", step, op, id, got, *twin)
		}
		read, err := s.Get(ctx, id)
		if err != nil || read != *twin {
			t.Fatalf("step %d: Get(%s) = %+v, %v; want %+v", step, id, read, err, *twin)
		}
	}
}

func sameKind(got, want error) bool {
	for _, kind := range []error{domain.ErrNotFound, domain.ErrConflict} {
		if errors.Is(want, kind) {
			return errors.Is(got, kind)
		}
	}
	return got == nil && want == nil
}

// TestExpireDueExactlyOnce runs the alarm handler's transition three times over the same holds
// (four shards, so several script calls), as a replayed alarm would: each hold expires once,
// and a hold not yet due or never created is left alone.
func TestExpireDueExactlyOnce(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	ctx := context.Background()
	start := time.UnixMilli(1_700_000_000_000)
	var ids []string
	for i := range 300 {
		id := fmt.Sprintf("hold-%d", i)
		ids = append(ids, id)
		if _, err := s.Create(ctx, id, start, 5*time.Second); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.Create(ctx, "later", start, time.Hour); err != nil {
		t.Fatal(err)
	}
	batch := append(append([]string{}, ids...), "later", "never-made")
	due := start.Add(5 * time.Second)
	for round := range 3 {
		changed, err := s.ExpireDue(ctx, batch, due.Add(time.Duration(round)*time.Millisecond))
		if err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		for i, c := range changed {
			if want := round == 0 && i < len(ids); c != want {
				t.Fatalf("round %d: %s changed = %v, want %v", round, batch[i], c, want)
			}
		}
	}
	for _, id := range ids {
		r, err := s.Get(ctx, id)
		if err != nil || r.Status != domain.Expired || r.ExpirationCount != 1 || r.AlarmAt != 0 || r.ExpiredAt != due.UnixMilli() {
			t.Fatalf("Get(%s) = %+v, %v; want expired once at %d with no alarm", id, r, err, due.UnixMilli())
		}
	}
	if r, _ := s.Get(ctx, "later"); r.Status != domain.Held || r.AlarmAt == 0 {
		t.Fatalf("Get(later) = %+v, want held with its alarm", r)
	}
}

// TestScriptRefusalIsInvalidArgument sends values the service's own checks stop (a replay time
// beyond 16 digits) straight to the store: the script refuses them, nothing is written, and
// the error is bad input, not a store failure.
func TestScriptRefusalIsInvalidArgument(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	ctx := context.Background()
	if _, err := s.Create(ctx, "seat-1", time.UnixMilli(1_700_000_000_000), 5*time.Second); err != nil {
		t.Fatal(err)
	}
	far := time.UnixMilli(1e17)
	if _, _, err := s.Expire(ctx, "seat-1", far); !errors.Is(err, domain.ErrInvalid) {
		t.Fatalf("Expire(now=1e17) = %v, want ErrInvalid", err)
	}
	if _, err := s.Settle(ctx, "seat-1", domain.Confirmed, far); !errors.Is(err, domain.ErrInvalid) {
		t.Fatalf("Settle(now=1e17) = %v, want ErrInvalid", err)
	}
	if _, err := s.Create(ctx, "seat-2", far, 5*time.Second); !errors.Is(err, domain.ErrInvalid) {
		t.Fatalf("Create(now=1e17) = %v, want ErrInvalid", err)
	}
	if r, err := s.Get(ctx, "seat-1"); err != nil || r.Status != domain.Held || r.ExpirationCount != 0 {
		t.Fatalf("after refusals Get(seat-1) = %+v, %v; want it held, untouched", r, err)
	}
	if r, err := s.Get(ctx, "seat-2"); err != nil || r.Status != domain.Missing {
		t.Fatalf("after a refused create Get(seat-2) = %+v, %v; want missing", r, err)
	}
}
