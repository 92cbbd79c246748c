package clocktest

import (
	"testing"
	"time"
)

func TestManualMovesOnlyWhenTold(t *testing.T) {
	t.Parallel()
	start := time.UnixMilli(1_800_000_000_000)
	m := New(start)
	if got := m.Now(); !got.Equal(start) {
		t.Fatalf("Now() = %v, want %v", got, start)
	}
	m.Add(90 * time.Second)
	if got, want := m.Now(), start.Add(90*time.Second); !got.Equal(want) {
		t.Fatalf("Now() after Add(90s) = %v, want %v", got, want)
	}
	m.Set(start)
	if got := m.Now(); !got.Equal(start) {
		t.Fatalf("Now() after Set(start) = %v, want %v", got, start)
	}
}
