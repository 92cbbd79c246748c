package devstore

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/vigil-dev/vigil/pkg/wait"
)

func client(t *testing.T, s *Store) *redis.Client {
	t.Helper()
	opt, err := redis.ParseURL(s.URL)
	if err != nil {
		t.Fatal(err)
	}
	c := redis.NewClient(opt)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// startEmbedded opens an embedded store on dir and a client of it; the caller closes the store.
func startEmbedded(t *testing.T, ctx context.Context, dir string) (*Store, *redis.Client) {
	t.Helper()
	s, err := Open(ctx, Options{DataDir: dir, Kind: Embedded})
	if err != nil {
		t.Fatal(err)
	}
	return s, client(t, s)
}

// TestEmbeddedStoreSurvivesACrash writes every kind of key Vigil uses, waits for the periodic
// save (no Close: the process "crashes"), and opens a second store on a copy of what was left on
// disk: every key is back, and a TTL keeps what was left of it.
func TestEmbeddedStoreSurvivesACrash(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	s, c := startEmbedded(t, ctx, dir)
	t.Cleanup(func() { _ = s.Close() })
	if !strings.Contains(s.Detail, "a crash loses at most the last 1s") {
		t.Errorf("Detail = %q, want it to say what a crash can lose", s.Detail)
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(c.Set(ctx, "str", "hello {world}", 0).Err())
	must(c.Set(ctx, "lease", "owner", time.Minute).Err())
	must(c.HSet(ctx, "hash", "status", "held", "alarmAt", "1900000005000").Err())
	must(c.ZAdd(ctx, "alarms", redis.Z{Score: 1900000005000, Member: "seat-12a"}, redis.Z{Score: 1.5, Member: "x"}).Err())
	must(c.RPush(ctx, "list", "a", "b", "c").Err())
	must(c.SAdd(ctx, "set", "m1", "m2").Err())
	must(c.XAdd(ctx, &redis.XAddArgs{Stream: "stream", ID: "5-1", Values: []string{"body", "hi", "user", "ann"}}).Err())

	file := filepath.Join(dir, SnapshotFile)
	wait.For(t, "the periodic save to hold the last key written", func() error {
		data, err := os.ReadFile(file)
		if err != nil {
			return err
		}
		if !strings.Contains(string(data), `"stream"`) {
			return fmt.Errorf("%s does not hold the stream yet", file)
		}
		return nil
	})
	crashed := t.TempDir()
	data, err := os.ReadFile(file)
	must(err)
	must(os.WriteFile(filepath.Join(crashed, SnapshotFile), data, 0o644))

	s2, c2 := startEmbedded(t, ctx, crashed)
	t.Cleanup(func() { _ = s2.Close() })
	if v, err := c2.Get(ctx, "str").Result(); v != "hello {world}" {
		t.Errorf("GET str = %q, %v", v, err)
	}
	if ttl, err := c2.PTTL(ctx, "lease").Result(); err != nil || ttl <= 0 || ttl > time.Minute {
		t.Errorf("PTTL lease = %v, %v; want what was left of a minute", ttl, err)
	}
	if h, err := c2.HGetAll(ctx, "hash").Result(); err != nil || h["status"] != "held" || h["alarmAt"] != "1900000005000" {
		t.Errorf("HGETALL hash = %v, %v", h, err)
	}
	if z, err := c2.ZRangeWithScores(ctx, "alarms", 0, -1).Result(); err != nil || len(z) != 2 || z[0].Score != 1.5 || z[1].Score != 1900000005000 || z[1].Member != "seat-12a" {
		t.Errorf("ZRANGE alarms = %v, %v; want both members with their exact scores", z, err)
	}
	if l, err := c2.LRange(ctx, "list", 0, -1).Result(); err != nil || strings.Join(l, ",") != "a,b,c" {
		t.Errorf("LRANGE list = %v, %v", l, err)
	}
	if n, err := c2.SCard(ctx, "set").Result(); err != nil || n != 2 {
		t.Errorf("SCARD set = %d, %v", n, err)
	}
	if x, err := c2.XRange(ctx, "stream", "-", "+").Result(); err != nil || len(x) != 1 || x[0].ID != "5-1" || x[0].Values["user"] != "ann" {
		t.Errorf("XRANGE stream = %v, %v", x, err)
	}
	// The embedded store's TTLs run with the clock, as Redis's do.
	must(c2.Set(ctx, "brief", "v", 50*time.Millisecond).Err())
	wait.Until(t, "a 50 ms key to expire", func() bool { return c2.Exists(ctx, "brief").Val() == 0 })
}

// TestEmbeddedStoreDropsKeysThatExpiredWhileStopped: a key whose TTL ran out while the store
// was stopped does not come back.
func TestEmbeddedStoreDropsKeysThatExpiredWhileStopped(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	s, c := startEmbedded(t, ctx, dir)
	if err := c.Set(ctx, "lease", "owner", 200*time.Millisecond).Err(); err != nil {
		t.Fatal(err)
	}
	if err := c.Set(ctx, "kept", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("Close = %v", err)
	}
	// The snapshot says when it was taken; a later start subtracts the time stopped.
	wait.Until(t, "the lease's TTL to pass while stopped", func() bool {
		info, err := os.Stat(filepath.Join(dir, SnapshotFile))
		return err == nil && time.Since(info.ModTime()) > 300*time.Millisecond
	})
	s2, c2 := startEmbedded(t, ctx, dir)
	defer s2.Close()
	if n := c2.Exists(ctx, "lease").Val(); n != 0 {
		t.Errorf("lease exists after its TTL ran out while stopped")
	}
	if v := c2.Get(ctx, "kept").Val(); v != "v" {
		t.Errorf("GET kept = %q, want v", v)
	}
}
