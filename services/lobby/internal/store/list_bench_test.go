package store

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/vigil-dev/vigil/pkg/redistest"
	"github.com/vigil-dev/vigil/services/lobby/internal/domain"
)

func TestMain(m *testing.M) { redistest.Main(m) }

// BenchmarkList10k times listing a lobby of 10,000 rooms (run with -bench; not in the suite).
func BenchmarkList10k(b *testing.B) {
	rdb, prefix := redistest.Client(b)
	s, err := New(rdb, Options{Prefix: prefix})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	now := time.Now().UnixMilli()
	for i := range 10000 {
		r := domain.Room{Code: fmt.Sprintf("r%05d", i), Name: fmt.Sprintf("Practice room %d", i), CreatedAt: now + int64(i),
			Video: domain.Video{Title: "Routine for the spring show", DurationMs: 215_000}}
		if err := s.Create(ctx, r, "hash"); err != nil {
			b.Fatal(err)
		}
	}
	b.ResetTimer()
	for b.Loop() {
		rooms, _, _, err := s.List(ctx, time.UnixMilli(now-1))
		if err != nil || len(rooms) != 10000 {
			b.Fatalf("List = %d rooms, %v", len(rooms), err)
		}
	}
}
