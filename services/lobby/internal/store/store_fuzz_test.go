package store

import (
	"context"
	"testing"
	"time"

	"github.com/vigil-dev/vigil/pkg/redistest"
	"github.com/vigil-dev/vigil/services/lobby/internal/domain"
)

// FuzzOccupancyDeltas applies a fuzzed run of occupancy deltas and snapshots to one room and
// to a model of the rule (domain.NextDelta; a snapshot applies unless a newer one is applied;
// counts never go below zero): every outcome and the final counts agree.
//
// Each op is 4 bytes: kind (even delta, odd snapshot), sequence step (int8, from the model's
// current sequence), viewers and leaders (int8: a change for a delta, a count for a snapshot).
func FuzzOccupancyDeltas(f *testing.F) {
	rdb, prefix := redistest.Client(f)
	s, err := New(rdb, Options{Prefix: prefix})
	if err != nil {
		f.Fatal(err)
	}
	ctx := context.Background()
	f.Add([]byte{0, 1, 1, 1, 0, 1, 2, 0, 0, 3, 1, 0, 1, 4, 5, 1, 0, 0, 0xff, 0})
	f.Add([]byte{0, 1, 0xfb, 0xff, 0, 2, 1, 0, 1, 0xfe, 3, 3})
	f.Fuzz(func(t *testing.T, ops []byte) {
		code := domain.NewCode()
		now := time.Now().UnixMilli()
		if err := s.Create(ctx, domain.Room{Code: code, Name: "fuzz", CreatedAt: now, Video: domain.Video{Title: "t", DurationMs: 1000}}, "hash"); err != nil {
			t.Fatalf("Create: %v", err)
		}
		defer func() { _, _ = s.Remove(ctx, code) }()
		var seq, viewers, leaders int64
		for i := 0; i+4 <= len(ops) && i < 4*64; i += 4 {
			next := seq + int64(int8(ops[i+1]))
			if next < 0 {
				next = 0
			}
			v, l := int32(int8(ops[i+2])), int32(int8(ops[i+3]))
			if ops[i]%2 == 0 {
				got, err := s.ApplyDelta(ctx, code, next, v, l)
				if err != nil {
					t.Fatalf("op %d: ApplyDelta(seq %d, %d, %d): %v", i/4, next, v, l, err)
				}
				want := domain.NextDelta(seq, next)
				if got != want {
					t.Fatalf("op %d: ApplyDelta(seq %d) after %d = %v, want %v", i/4, next, seq, got, want)
				}
				if want == domain.Applied {
					seq, viewers, leaders = next, max(0, viewers+int64(v)), max(0, leaders+int64(l))
				}
			} else {
				v, l = max(0, v), max(0, l)
				got, err := s.ApplySnapshot(ctx, code, next, v, l)
				if err != nil {
					t.Fatalf("op %d: ApplySnapshot(seq %d, %d, %d): %v", i/4, next, v, l, err)
				}
				if want := next >= seq; got != want {
					t.Fatalf("op %d: ApplySnapshot(seq %d) after %d = %v, want %v", i/4, next, seq, got, want)
				}
				if got {
					seq, viewers, leaders = next, int64(v), int64(l)
				}
			}
		}
		r, err := s.Get(ctx, code, time.UnixMilli(0))
		if err != nil {
			t.Fatalf("Get: %v", err)
		}
		if int64(r.Viewers) != viewers || r.LeaderPresent != (leaders > 0) {
			t.Fatalf("room after the ops = %d viewers, leader %v; want %d, %v", r.Viewers, r.LeaderPresent, viewers, leaders > 0)
		}
	})
}
