package clock

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"math"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/vigil-dev/vigil/pkg/clock/clocktest"
	"github.com/vigil-dev/vigil/pkg/redistest"
)

func TestMain(m *testing.M) { redistest.Main(m) }

// manual is a base clock that moves only when told, and a shared clock skew ahead of it: its
// source answers after out and returns after back (a round trip of out+back), so a test picks
// each sample's round trip and where in it the shared clock was read.
type manual struct {
	*clocktest.Manual
	mu   sync.Mutex
	skew time.Duration // shared − local
}

// shared is the shared clock's true time.
func (m *manual) shared() time.Time {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.Now().Add(m.skew)
}

func (m *manual) source(out, back time.Duration) Source {
	return func(context.Context) (time.Time, error) {
		m.Add(out)
		t := m.shared()
		m.Add(back)
		return t, nil
	}
}

func newTestClock(t *testing.T, m *manual, o Options) (*Clock, *prometheus.Registry, *bytes.Buffer) {
	t.Helper()
	reg := prometheus.NewRegistry()
	var log bytes.Buffer
	o.Base, o.Registerer, o.Service = m.Now, reg, "test"
	o.Logger = slog.New(slog.NewJSONHandler(&log, nil))
	c, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	return c, reg, &log
}

func sampleOnce(t *testing.T, c *Clock, src Source) {
	t.Helper()
	if err := c.Sample(context.Background(), src); err != nil {
		t.Fatal(err)
	}
}

// A base clock 30s ahead or behind reads the shared clock's time once disciplined, within the
// error bound: half the round trip, however asymmetric the path was.
func TestNowFollowsTheSharedClockWithinTheErrorBound(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name      string
		skew      time.Duration
		out, back time.Duration
	}{
		{"30s behind, symmetric", 30 * time.Second, 2 * time.Millisecond, 2 * time.Millisecond},
		{"30s ahead, symmetric", -30 * time.Second, 2 * time.Millisecond, 2 * time.Millisecond},
		{"30s ahead, slow way out", -30 * time.Second, 9 * time.Millisecond, time.Millisecond},
		{"30s behind, slow way back", 30 * time.Second, time.Millisecond, 9 * time.Millisecond},
	} {
		m := &manual{Manual: clocktest.New(time.Unix(1_000_000, 0)), skew: tc.skew}
		c, _, _ := newTestClock(t, m, Options{})
		if got := c.Now(); !got.Equal(m.Now()) {
			t.Errorf("%s: Now before a sample = %v, want the base clock's %v", tc.name, got, m.Now())
		}
		sampleOnce(t, c, m.source(tc.out, tc.back))
		st := c.Status()
		rtt := tc.out + tc.back
		if want := rtt/2 + drifted(rtt/2); st.RTT != rtt || st.Error != want {
			t.Errorf("%s: RTT, Error = %v, %v; want %v, %v", tc.name, st.RTT, st.Error, rtt, want)
		}
		// The estimate assumes the shared clock was read halfway: off by (out − back)/2.
		if want := tc.skew + (tc.out-tc.back)/2; st.Offset != want {
			t.Errorf("%s: Offset = %v, want %v", tc.name, st.Offset, want)
		}
		m.Add(time.Minute)
		if miss := c.Now().Sub(m.shared()); abs(miss) > c.Status().Error {
			t.Errorf("%s: Now − shared = %v, beyond the error bound %v", tc.name, miss, c.Status().Error)
		}
	}
}

// The sample in use is the one with the smallest error bound: the shortest round trip, as long
// as its age has not made it worse than a fresher one.
func TestTheShortestRoundTripWinsUntilItAges(t *testing.T) {
	t.Parallel()
	m := &manual{Manual: clocktest.New(time.Unix(1_000_000, 0)), skew: 5 * time.Second}
	c, _, _ := newTestClock(t, m, Options{Keep: 4, Drift: 1e-3})
	// Asymmetric paths, so each sample's offset differs and tells which one is in use.
	sampleOnce(t, c, m.source(6*time.Millisecond, 4*time.Millisecond)) // rtt 10ms, offset 5s + 1ms
	sampleOnce(t, c, m.source(1*time.Millisecond, 1*time.Millisecond)) // rtt 2ms, offset 5s
	sampleOnce(t, c, m.source(5*time.Millisecond, 3*time.Millisecond)) // rtt 8ms, offset 5s + 1ms
	if st := c.Status(); st.RTT != 2*time.Millisecond || st.Offset != 5*time.Second {
		t.Fatalf("after rtts 10, 2, 8 ms: RTT, Offset = %v, %v; want the 2ms sample's 2ms, 5s", st.RTT, st.Offset)
	}
	// 10s later the 2ms sample's bound is 1ms + 10ms of allowed drift: a fresh 8ms one (4ms)
	// is better.
	m.Add(10 * time.Second)
	sampleOnce(t, c, m.source(5*time.Millisecond, 3*time.Millisecond))
	if st := c.Status(); st.RTT != 8*time.Millisecond || st.Offset != 5*time.Second+time.Millisecond {
		t.Fatalf("after 10s: RTT, Offset = %v, %v; want the fresh 8ms sample", st.RTT, st.Offset)
	}
	// Only the last Keep samples count: a 2ms sample pushed out is not used again.
	for range 4 {
		sampleOnce(t, c, m.source(2*time.Millisecond, 2*time.Millisecond))
	}
	if st := c.Status(); st.Samples != 4 || st.RTT != 4*time.Millisecond {
		t.Fatalf("after 4 more 4ms samples: Samples, RTT = %d, %v; want 4, 4ms", st.Samples, st.RTT)
	}
}

// The error bound is half the round trip plus the drift allowed since the sample, and the
// gauges report the offset and the bound.
func TestErrorBoundGrowsWithAgeAndGaugesReport(t *testing.T) {
	t.Parallel()
	m := &manual{Manual: clocktest.New(time.Unix(1_000_000, 0)), skew: -30 * time.Second}
	c, reg, _ := newTestClock(t, m, Options{})
	sampleOnce(t, c, m.source(time.Millisecond, time.Millisecond)) // taken 1ms ago, at the round trip's middle
	if st, want := c.Status(), time.Millisecond+drifted(time.Millisecond); st.Error != want {
		t.Fatalf("Error = %v, want %v (half the 2ms round trip, and 1ms of drift)", st.Error, want)
	}
	m.Add(10 * time.Second)
	// 100 ppm (DefaultDrift) of 10s is 1ms.
	age := 10*time.Second + time.Millisecond
	if st, want := c.Status(), time.Millisecond+drifted(age); st.Error != want || st.Age != age ||
		want.Round(time.Microsecond) != 2*time.Millisecond {
		t.Fatalf("10s later: Error, Age = %v, %v; want %v (about 2ms), %v", st.Error, st.Age, want, age)
	}
	offset, err := testutil.GatherAndCount(reg, "vigil_clock_offset_seconds", "vigil_clock_error_seconds")
	if err != nil || offset != 2 {
		t.Fatalf("gauges gathered = %d, %v; want 2", offset, err)
	}
	mf, _ := reg.Gather()
	for _, f := range mf {
		got := f.GetMetric()[0].GetGauge().GetValue()
		label := f.GetMetric()[0].GetLabel()[0]
		if label.GetName() != "service" || label.GetValue() != "test" {
			t.Errorf("%s label = %v, want service=test", f.GetName(), label)
		}
		switch f.GetName() {
		case "vigil_clock_offset_seconds":
			if got != -30 {
				t.Errorf("vigil_clock_offset_seconds = %v, want -30 (this clock is ahead)", got)
			}
		case "vigil_clock_error_seconds":
			if want := (time.Millisecond + drifted(time.Millisecond)).Seconds(); got != want {
				t.Errorf("vigil_clock_error_seconds = %v, want %v (as of the last sample)", got, want)
			}
		}
	}
}

// A clock further than WarnAbove from the shared one says so once in the log, and Check names
// the offset; back within it, the log says so and Check is nil.
func TestOffsetBeyondTheBoundWarns(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		skew time.Duration
		word string
	}{{30 * time.Second, "30s behind"}, {-30 * time.Second, "30s ahead of"}} {
		m := &manual{Manual: clocktest.New(time.Unix(1_000_000, 0)), skew: tc.skew}
		c, _, log := newTestClock(t, m, Options{})
		if err := c.Check(); err == nil {
			t.Errorf("Check before a sample = nil, want an error")
		}
		sampleOnce(t, c, m.source(0, 0))
		sampleOnce(t, c, m.source(0, 0))
		err := c.Check()
		if err == nil || !strings.Contains(err.Error(), tc.word+" Redis's TIME (more than 1s)") {
			t.Errorf("Check with %v = %v, want it to say %q", tc.skew, err, tc.word)
		}
		lines := logLines(t, log)
		if len(lines) != 1 || lines[0]["event"] != "clock_offset" || lines[0]["level"] != "WARN" ||
			lines[0]["offsetSeconds"] != tc.skew.Seconds() || lines[0]["service"] != "test" {
			t.Errorf("log with %v = %v, want one clock_offset warning with offsetSeconds %v", tc.skew, lines, tc.skew.Seconds())
		}
		m.mu.Lock()
		m.skew = 900 * time.Millisecond
		m.mu.Unlock()
		sampleOnce(t, c, m.source(0, 0))
		if err := c.Check(); err != nil {
			t.Errorf("Check 0.9s off = %v, want nil", err)
		}
		if lines := logLines(t, log); len(lines) != 2 || lines[1]["event"] != "clock_offset_ok" {
			t.Errorf("log after the clock agrees again = %v, want a clock_offset_ok line", lines)
		}
	}
}

// A failed sample keeps the last good one; Sync fails only when no sample succeeds.
func TestFailedSamplesKeepTheLastGoodOne(t *testing.T) {
	t.Parallel()
	m := &manual{Manual: clocktest.New(time.Unix(1_000_000, 0)), skew: 30 * time.Second}
	c, _, _ := newTestClock(t, m, Options{})
	down := func(context.Context) (time.Time, error) { return time.Time{}, errors.New("connection refused") }
	if err := c.Sync(context.Background(), down); err == nil || !strings.Contains(err.Error(), "connection refused") {
		t.Fatalf("Sync with the shared clock down = %v, want its error", err)
	}
	if err := c.Sync(context.Background(), m.source(time.Millisecond, time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	if err := c.Sample(context.Background(), down); err == nil {
		t.Fatal("Sample of a source that fails = nil, want its error")
	}
	if miss := c.Now().Sub(m.shared()); abs(miss) > c.Status().Error {
		t.Errorf("after a failed sample Now − shared = %v, beyond the bound %v", miss, c.Status().Error)
	}
}

// drifted is the drift DefaultDrift allows over age.
func drifted(age time.Duration) time.Duration {
	return time.Duration(math.Round(DefaultDrift * float64(age)))
}

func logLines(t *testing.T, b *bytes.Buffer) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(b.String()), "\n") {
		if l == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("log line %q: %v", l, err)
		}
		out = append(out, m)
	}
	return out
}

// Against a real Redis, a base clock 30s ahead or behind is corrected: Redis's TIME, read
// between two readings of Now, lies between them give or take the error bound. The measured
// offset and round trip are logged (go test -v) for OPERATIONS.md.
func TestRedisTimeDisciplinesASkewedClock(t *testing.T) {
	t.Parallel()
	rdb, _ := redistest.Client(t)
	for _, skew := range []time.Duration{30 * time.Second, -30 * time.Second} {
		c, err := New(Options{Base: func() time.Time { return time.Now().Add(skew) }, Registerer: prometheus.NewRegistry()})
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		if err := c.Sync(ctx, RedisTime(rdb)); err != nil {
			t.Fatal(err)
		}
		for range 20 { // a few more, as Run would take them
			if err := c.Sample(ctx, RedisTime(rdb)); err != nil {
				t.Fatal(err)
			}
		}
		st := c.Status()
		before := c.Now()
		shared := redistest.Time(t, rdb)
		after := c.Now()
		slack := st.Error + time.Microsecond // TIME's resolution
		if shared.Before(before.Add(-slack)) || shared.After(after.Add(slack)) {
			t.Errorf("base %+v: Redis TIME %v outside disciplined [%v, %v] ± %v", skew, shared, before, after, slack)
		}
		if d := st.Offset + skew; abs(d) > 50*time.Millisecond {
			t.Errorf("base %+v: Offset = %v, want about %v", skew, st.Offset, -skew)
		}
		if err := c.Check(); err == nil {
			t.Errorf("base %+v: Check = nil, want the offset named", skew)
		}
		t.Logf("base %+v: offset %v (host's own offset from Redis %v), error bound %v, best rtt %v of %d samples",
			skew, st.Offset, st.Offset+skew, st.Error, st.RTT, st.Samples)
	}
}

// The warning names the offset to a tenth of the bound: an estimate 1 ms short of 30s reads
// "30s", not "29.999s", and a small bound keeps a finer step.
func TestDescribeRoundsToATenthOfTheBound(t *testing.T) {
	for _, tc := range []struct {
		offset, bound time.Duration
		want          string
	}{
		{-29999 * time.Millisecond, time.Second, "is 30s ahead of"},
		{30001 * time.Millisecond, time.Second, "is 30s behind"},
		{1234 * time.Millisecond, time.Second, "is 1.2s behind"},
		{-62 * time.Millisecond, 50 * time.Millisecond, "is 60ms ahead of"},
		{3 * time.Millisecond, 2 * time.Millisecond, "is 3ms behind"},
	} {
		if got := describe(tc.offset, tc.bound); !strings.Contains(got, tc.want) {
			t.Errorf("describe(%v, %v) = %q, want it to say %q", tc.offset, tc.bound, got, tc.want)
		}
	}
}
