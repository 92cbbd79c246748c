package app

import (
	"context"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/vigil-dev/vigil/pkg/redistest"
	"github.com/vigil-dev/vigil/services/chat/internal/domain"
	"github.com/vigil-dev/vigil/services/chat/internal/store"
)

func TestMain(m *testing.M) { redistest.Main(m) }

func newApp(t *testing.T) (*App, context.Context) {
	t.Helper()
	rdb, prefix := redistest.Client(t)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	log := slog.New(slog.DiscardHandler)
	s := store.New(rdb, store.Options{Prefix: prefix, Keep: 100})
	f := store.NewFeed(s, 64, log)
	go func() { _ = f.Run(ctx) }()
	return New(s, f, Options{Now: time.Now, JoinLimit: 50, Lease: 15 * time.Second, Logger: log}), ctx
}

func ids(msgs any) string {
	var out []int64
	switch ms := msgs.(type) {
	case []domain.Message:
		for _, m := range ms {
			out = append(out, m.ID)
		}
	case []Update:
		for _, u := range ms {
			out = append(out, u.Message.ID)
		}
	}
	if out == nil {
		out = []int64{}
	}
	return fmt.Sprint(out)
}

// TestAttachmentFillsGaps: what pub/sub dropped is read back from the log, and what was
// already delivered is skipped, so Next never skips or repeats an id.
func TestAttachmentFillsGaps(t *testing.T) {
	t.Parallel()
	a, ctx := newApp(t)
	post := func(i int) {
		t.Helper()
		if _, err := a.Post(ctx, domain.Post{Room: "room-a", UserID: "u", Body: fmt.Sprint(i)}); err != nil {
			t.Fatal(err)
		}
	}
	post(1)
	at, h, err := a.Attach(ctx, "room-a", nil, false)
	if err != nil || ids(h.Messages) != "[1]" || h.LastID != 1 {
		t.Fatalf("Attach = %v, %v; want history [1]", h, err)
	}
	defer at.Close()
	for i := 2; i <= 5; i++ {
		post(i)
	}
	// As if pub/sub lost 2..4 and delivered only 5.
	got, err := at.accept(ctx, nil, domain.Message{ID: 5, Body: "5"})
	if err != nil || ids(got) != "[2 3 4 5]" {
		t.Fatalf("accept(5) after 1 = %v, %v; want [2 3 4 5]", ids(got), err)
	}
	// The live copies of 2..5 that pub/sub did deliver are skipped.
	nctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if msgs, err := at.Next(nctx); err != nil || len(msgs) != 0 {
		t.Fatalf("Next after the gap was filled = %v, %v; want nothing new", ids(msgs), err)
	}
	post(6)
	post(7)
	// A Resync hint reads everything after the last id.
	got, err = at.accept(ctx, nil, domain.Message{})
	if err != nil || ids(got) != "[6 7]" {
		t.Fatalf("accept(resync) = %v, %v; want [6 7]", ids(got), err)
	}
}
