package alarm

import (
	"math"
	"strconv"
	"strings"
	"testing"
	"time"
)

// These need no Redis.

func TestShardOfIsStable(t *testing.T) {
	t.Parallel()
	// FNV-1a: "" hashes to the offset basis 2166136261 and "a" to 0xe40c292c. A change here
	// would move every object of a running deployment to another shard.
	for _, tc := range []struct {
		id     string
		shards int
		want   int
	}{
		{"", 16, 2166136261 % 16},
		{"a", 16, 0xe40c292c % 16},
		{"a", 7, 0xe40c292c % 7},
		{"reservation-42", 16, 14},
		{"room:ABCD", 7, 3},
		{"anything", 1, 0},
	} {
		if got := shardOf(tc.id, tc.shards); got != tc.want {
			t.Errorf("shardOf(%q, %d) = %d, want %d", tc.id, tc.shards, got, tc.want)
		}
	}
}

func TestShardKeysShareOneHashTag(t *testing.T) {
	t.Parallel()
	k := shardKeys("vigil", "reservations", 3)
	if k.Tag != "vigil:{reservations:3}" {
		t.Fatalf("Tag = %q, want vigil:{reservations:3}", k.Tag)
	}
	for _, key := range []string{k.Alarms, k.Attempts, k.InFlight, k.Dead, k.DeadInfo} {
		if !strings.HasPrefix(key, k.Tag+":") || strings.Count(key, "{") != 1 {
			t.Errorf("key %q does not carry exactly the shard's hash tag %q", key, k.Tag)
		}
	}
}

func TestFractionalScoreRoundTrip(t *testing.T) {
	t.Parallel()
	q := &Queue{}
	for _, at := range []time.Time{
		time.UnixMilli(0),
		time.UnixMilli(1_764_400_000_123),
		time.UnixMilli(1_764_400_000_123).Add(999 * time.Microsecond), // sub-ms is dropped
		time.UnixMilli(4_102_444_800_000),                             // year 2100
	} {
		seen := map[string]bool{}
		for range 200 {
			s := q.fractionalScore(at)
			seen[s] = true
			f, err := strconv.ParseFloat(s, 64)
			if err != nil {
				t.Fatalf("fractionalScore(%v) = %q: %v", at, s, err)
			}
			whole, frac := math.Modf(f)
			if int64(whole) != at.UnixMilli() || frac <= 0 || frac >= 1 {
				t.Fatalf("fractionalScore(%v) = %q, want %d plus a fraction in (0,1)", at, s, at.UnixMilli())
			}
			if steps := frac * 1024; steps != math.Trunc(steps) {
				t.Fatalf("fractionalScore(%v) = %q: fraction %v is not a multiple of 1/1024, so not exact", at, s, frac)
			}
			// The string Redis gets back from Lua's tostring or ZSCORE parses to the same float.
			if back := strconv.FormatFloat(f, 'f', -1, 64); back != s {
				t.Fatalf("fractionalScore(%v) = %q does not round-trip (got %q)", at, s, back)
			}
		}
		if len(seen) < 100 {
			t.Errorf("fractionalScore(%v) gave only %d distinct scores in 200 claims", at, len(seen))
		}
	}
}

func TestJitterStaysWithinTwentyPercent(t *testing.T) {
	t.Parallel()
	q := &Queue{}
	for _, d := range []time.Duration{0, time.Millisecond, 2 * time.Second} {
		for range 100 {
			if got := q.jittered(d); got > d || got < d-d/5 {
				t.Fatalf("jittered(%v) = %v, want within [%v, %v]", d, got, d-d/5, d)
			}
		}
	}
}
