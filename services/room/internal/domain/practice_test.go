package domain

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

func TestRateCenti(t *testing.T) {
	t.Parallel()
	tests := []struct {
		rate float64
		want int64 // 0: refused
	}{
		{0, 100}, {1, 100}, {0.25, 25}, {0.5, 50}, {0.75, 75}, {1.5, 150}, {2, 200}, {0.3, 30}, {1.95, 195},
		{0.2, 0}, {2.05, 0}, {0.26, 0}, {1.01, 0}, {-1, 0}, {100, 0},
	}
	for _, tt := range tests {
		got, err := RateCenti(tt.rate)
		if tt.want == 0 {
			if !errors.Is(err, ErrInvalid) {
				t.Errorf("RateCenti(%v) = %d, %v; want refused", tt.rate, got, err)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("RateCenti(%v) = %d, %v; want %d", tt.rate, got, err, tt.want)
		}
	}
}

func TestCheckControlPractice(t *testing.T) {
	t.Parallel()
	dancers := func(n int) []byte {
		ds := make([]string, n)
		for i := range ds {
			ds[i] = fmt.Sprintf(`{"name":"d%d","x":1,"y":1}`, i)
		}
		return []byte(`{"grid":{"cols":8,"rows":6},"dancers":[` + strings.Join(ds, ",") + `]}`)
	}
	tests := []struct {
		name string
		c    Control
		want string // "" accepted, else a part of the sentence
	}{
		{"count-in", Control{Kind: KindSync, Playing: true, CountIn: &CountIn{Beats: 4, BPM: 120}}, ""},
		{"count-in while paused", Control{Kind: KindSync, CountIn: &CountIn{Beats: 4, BPM: 120}}, "with playing true"},
		{"17 beats", Control{Kind: KindSync, Playing: true, CountIn: &CountIn{Beats: 17, BPM: 120}}, "1 to 16 beats"},
		{"0 beats", Control{Kind: KindSync, Playing: true, CountIn: &CountIn{Beats: 0, BPM: 120}}, "1 to 16 beats"},
		{"241 bpm", Control{Kind: KindSync, Playing: true, CountIn: &CountIn{Beats: 8, BPM: 241}}, "40 to 240"},
		{"39 bpm", Control{Kind: KindSync, Playing: true, CountIn: &CountIn{Beats: 8, BPM: 39}}, "40 to 240"},
		{"rate off the grid", Control{Kind: KindSync, Rate: 0.33}, "steps of 0.05"},
		{"loop", Control{Kind: KindLoop, Loop: Loop{StartMs: 1000, EndMs: 2000}}, ""},
		{"loop cleared", Control{Kind: KindLoop}, ""},
		{"loop backwards", Control{Kind: KindLoop, Loop: Loop{StartMs: 2000, EndMs: 1000}}, "must end after it starts"},
		{"empty loop", Control{Kind: KindLoop, Loop: Loop{StartMs: 2000, EndMs: 2000}}, "must end after it starts"},
		{"loop past a day", Control{Kind: KindLoop, Loop: Loop{StartMs: 0, EndMs: MaxPositionMs + 1}}, "positionMs"},
		{"mark formation", Control{Kind: KindMarkFormation, PositionMs: 5, Formation: dancers(MaxDancers)}, ""},
		{"mark formation cleared", Control{Kind: KindMarkFormation, PositionMs: 5, Formation: []byte("null")}, ""},
		{"mark formation of 33", Control{Kind: KindMarkFormation, PositionMs: 5, Formation: dancers(MaxDancers + 1)}, "at most 32 dancers; this one has 33"},
		{"mark formation not a stage", Control{Kind: KindMarkFormation, PositionMs: 5, Formation: []byte(`[1,2]`)}, "A mark's formation is null or"},
		{"default formation of 33", Control{Kind: KindFormation, Formation: dancers(MaxDancers + 1)}, "at most 32 dancers"},
		{"default formation of any shape", Control{Kind: KindFormation, Formation: []byte(`"hello"`)}, ""},
		{"unknown kind", Control{Kind: "speed"}, "loop or markFormation"},
	}
	for _, tt := range tests {
		c := tt.c
		err := CheckControl(&c)
		switch {
		case tt.want == "" && err != nil:
			t.Errorf("%s: CheckControl = %v, want accepted", tt.name, err)
		case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want) || !errors.Is(err, ErrInvalid)):
			t.Errorf("%s: CheckControl = %v, want an ErrInvalid saying %q", tt.name, err, tt.want)
		}
	}
}

func TestCountInMs(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		c    CountIn
		want int64
	}{{CountIn{4, 120}, 2000}, {CountIn{8, 100}, 4800}, {CountIn{1, 240}, 250}, {CountIn{3, 70}, 2571}, {CountIn{}, 0}} {
		if got := tt.c.Ms(); got != tt.want {
			t.Errorf("%+v.Ms() = %d, want %d", tt.c, got, tt.want)
		}
	}
}

func TestClock(t *testing.T) {
	t.Parallel()
	for ms, want := range map[int64]string{0: "0:00.0", 12_345: "0:12.3", 61_000: "1:01.0", 3_723_400: "1:02:03.4"} {
		if got := Clock(ms); got != want {
			t.Errorf("Clock(%d) = %q, want %q", ms, got, want)
		}
	}
}
