package clock

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/redis/go-redis/v9"

	"github.com/vigil-dev/vigil/pkg/clock/clocktest"
	"github.com/vigil-dev/vigil/pkg/redistest"
	"github.com/vigil-dev/vigil/pkg/wait"
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

func (m *manual) source(out, back time.Duration) Source { return m.sourceOf("", out, back) }

// sourceOf is source answered by the named server.
func (m *manual) sourceOf(server string, out, back time.Duration) Source {
	return func(context.Context) (Reading, error) {
		m.Add(out)
		t := m.shared()
		m.Add(back)
		return Reading{Time: t, Server: server}, nil
	}
}

func (m *manual) setSkew(d time.Duration) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.skew = d
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
		m.setSkew(900 * time.Millisecond)
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
	down := func(context.Context) (Reading, error) { return Reading{}, errors.New("connection refused") }
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

// A better sample that puts the shared clock 100 ms behind what Now has read is not stepped
// to: Now runs at 95 % of the base clock's rate (DefaultSlew) until it meets the new estimate,
// 2 s later, the error bound counting what is left meanwhile, and follows it after.
func TestStepBackIsSlewedNotStepped(t *testing.T) {
	t.Parallel()
	m := &manual{Manual: clocktest.New(time.Unix(1_000_000, 0)), skew: 5 * time.Second}
	c, _, _ := newTestClock(t, m, Options{})
	sampleOnce(t, c, m.source(5*time.Millisecond, 5*time.Millisecond)) // rtt 10 ms
	before := c.Now()
	m.setSkew(5*time.Second - 100*time.Millisecond)
	sampleOnce(t, c, m.source(time.Millisecond, time.Millisecond)) // rtt 2 ms: the better one
	// The new sample's estimate at this moment is 100 ms behind the old one's.
	adopted := c.Now()
	if adopted.Before(before) {
		t.Fatalf("Now after the better sample = %v, earlier than %v, read before it", adopted, before)
	}
	st := c.Status()
	if want := before.Add(2 * time.Millisecond).Sub(m.shared()); st.Slewing != want || st.Error != time.Millisecond+drifted(time.Millisecond)+st.Slewing {
		t.Fatalf("Status Slewing, Error = %v, %v; want %v (the step back not taken), the sample's bound + it", st.Slewing, st.Error, want)
	}
	for i := 1; st.Slewing > 0; i++ {
		m.Add(100 * time.Millisecond)
		now := c.Now()
		st = c.Status()
		if st.Slewing > 0 {
			if got := now.Sub(adopted); got != time.Duration(i)*95*time.Millisecond {
				t.Fatalf("%v of base clock into the slew, Now moved %v, want %v (95 %%)", time.Duration(i)*100*time.Millisecond, got, time.Duration(i)*95*time.Millisecond)
			}
		}
		if miss := now.Sub(m.shared()); miss < 0 || miss > st.Error {
			t.Fatalf("%d: Now − shared = %v, want within [0, the error bound %v]", i, miss, st.Error)
		}
		if i > 21 {
			t.Fatalf("still slewing %v after %v: a 100 ms step back at 5 %% takes 2 s", st.Slewing, time.Duration(i)*100*time.Millisecond)
		}
	}
	// Met: the clock runs at the base clock's rate on the new estimate.
	a := c.Now()
	m.Add(time.Second)
	if got := c.Now().Sub(a); got != time.Second {
		t.Errorf("after the slew Now moved %v in a second of the base clock, want 1s", got)
	}
	if miss := c.Now().Sub(m.shared()); abs(miss) > c.Status().Error {
		t.Errorf("after the slew Now − shared = %v, beyond the bound %v", miss, c.Status().Error)
	}
}

// A better sample that puts the shared clock ahead is taken at once: Now steps forward.
func TestStepForwardIsTakenAtOnce(t *testing.T) {
	t.Parallel()
	m := &manual{Manual: clocktest.New(time.Unix(1_000_000, 0)), skew: 5 * time.Second}
	c, _, _ := newTestClock(t, m, Options{})
	sampleOnce(t, c, m.source(5*time.Millisecond, 5*time.Millisecond))
	c.Now()
	m.setSkew(5*time.Second + 300*time.Millisecond)
	sampleOnce(t, c, m.source(time.Millisecond, time.Millisecond))
	if st := c.Status(); st.Slewing != 0 || st.Offset != 5*time.Second+300*time.Millisecond {
		t.Fatalf("Status Slewing, Offset = %v, %v; want 0, 5.3s", st.Slewing, st.Offset)
	}
	if miss := c.Now().Sub(m.shared()); abs(miss) > c.Status().Error {
		t.Errorf("Now − shared = %v after the step forward, beyond the bound %v", miss, c.Status().Error)
	}
}

// Callers on many goroutines never see Now go back, while samples keep putting the shared
// clock behind and ahead of what Now has read: a call that starts after another returned
// reads at least what that one did, and the clock keeps moving. Run with -race.
func TestNowNeverGoesBackWithConcurrentCallers(t *testing.T) {
	t.Parallel()
	m := &manual{Manual: clocktest.New(time.Unix(1_000_000, 0))}
	c, _, _ := newTestClock(t, m, Options{Keep: 2})
	sampleOnce(t, c, m.source(time.Millisecond, time.Millisecond))
	start := c.Now()
	var returned atomic.Int64 // the latest time a completed call returned
	returned.Store(start.UnixNano())
	var calls atomic.Int64
	stop := make(chan struct{})
	var callers sync.WaitGroup
	errs := make(chan error, 8)
	for range 8 {
		callers.Add(1)
		go func() {
			defer callers.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				floor := returned.Load()
				got := c.Now().UnixNano()
				calls.Add(1)
				if got < floor {
					errs <- fmt.Errorf("Now = %v after a call had returned %v: %v back", time.Unix(0, got), time.Unix(0, floor), time.Duration(floor-got))
					return
				}
				for r := returned.Load(); got > r && !returned.CompareAndSwap(r, got); r = returned.Load() {
				}
			}
		}()
	}
	// The base clock moves on, and every sample steps the shared clock 50 ms back or 20 ms
	// ahead (each the newest of two with a round trip of 0, so the one chosen), until the
	// callers have made 200,000 calls among them.
	base := m.Now()
	for i := 0; i < 2000 || calls.Load() < 200_000; i++ {
		m.Add(500 * time.Microsecond)
		if i%20 == 0 {
			step := -50 * time.Millisecond
			if i%40 == 0 {
				step = 20 * time.Millisecond
			}
			m.setSkew(m.skew + step)
			sampleOnce(t, c, m.source(0, 0))
		}
	}
	close(stop)
	callers.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	moved := m.Now().Sub(base)
	if end := c.Now(); end.Sub(start) < moved/2 {
		t.Errorf("Now moved %v while the base clock moved %v: want the clock to keep running (at least half as fast)", end.Sub(start), moved)
	}
	t.Logf("%d calls while the base clock moved %v", calls.Load(), moved)
}

// Slew of 1 or more would stop the clock or run it back: New refuses it with a sentence.
func TestNewRefusesASlewThatStopsTheClock(t *testing.T) {
	_, err := New(Options{Slew: 1, Registerer: prometheus.NewRegistry()})
	if err == nil || !strings.Contains(err.Error(), "fraction below 1") {
		t.Errorf("New(Slew 1) = %v, want an error asking for a fraction below 1", err)
	}
}

// A sample answered by another server (a failover promoted a replica, or Redis restarted)
// drops the samples of the old one, however good their round trips: Now follows the new
// server's clock, here 40 ms behind the old one, through the slew, and the log says so.
func TestANewServerIsFollowedFromItsFirstSample(t *testing.T) {
	t.Parallel()
	m := &manual{Manual: clocktest.New(time.Unix(1_000_000, 0)), skew: time.Second}
	c, _, log := newTestClock(t, m, Options{})
	for range 3 {
		sampleOnce(t, c, m.sourceOf("old-primary", 500*time.Microsecond, 500*time.Microsecond)) // rtt 1 ms
	}
	c.Now() // the service reads the clock: from here on it may not go back
	m.setSkew(time.Second - 40*time.Millisecond)
	sampleOnce(t, c, m.sourceOf("new-primary", 5*time.Millisecond, 5*time.Millisecond)) // rtt 10 ms
	st := c.Status()
	if st.Server != "new-primary" || st.Samples != 1 || st.RTT != 10*time.Millisecond || st.Offset != time.Second-40*time.Millisecond {
		t.Fatalf("after the new server's first sample: Server, Samples, RTT, Offset = %q, %d, %v, %v; want new-primary, 1, 10ms, 960ms",
			st.Server, st.Samples, st.RTT, st.Offset)
	}
	if st.Slewing <= 35*time.Millisecond {
		t.Errorf("Slewing = %v, want about the 40 ms the new server is behind", st.Slewing)
	}
	m.Add(time.Second)
	if got := c.Status().Slewing; got != st.Slewing-50*time.Millisecond && got != 0 {
		t.Errorf("a second later Slewing = %v, want %v less (5 %% of 1s)", got, 50*time.Millisecond)
	}
	m.Add(time.Second)
	if miss := c.Now().Sub(m.shared()); abs(miss) > c.Status().Error || c.Status().Slewing != 0 {
		t.Errorf("2s later Now − the new server's time = %v (bound %v, slewing %v), want it followed", miss, c.Status().Error, c.Status().Slewing)
	}
	lines := logLines(t, log)
	if len(lines) != 1 || lines[0]["event"] != "clock_server_changed" || lines[0]["was"] != "old-primary" || lines[0]["now"] != "new-primary" {
		t.Errorf("log = %v, want one clock_server_changed from old-primary to new-primary", lines)
	}
}

// Against real Redis, as a failover reaches the client: the address it dials (a proxy here)
// forwards to a second Redis from one moment on, the connections to the first one cut. The
// run_id that RedisTime reads with TIME changes, the first server's samples are dropped, and
// Now follows the second server's TIME within the error bound. (Sentinel's own switch is the
// failover client's; what the clock must do is notice the server changed.)
func TestRedisTimeFollowsANewPrimary(t *testing.T) {
	t.Parallel()
	first, _ := redistest.Client(t)
	second := redistest.Start(t).Client(t)
	proxy := newSwitchProxy(t, first.Options().Addr)
	rdb := redis.NewClient(&redis.Options{Addr: proxy.addr()})
	t.Cleanup(func() { _ = rdb.Close() })
	var log bytes.Buffer
	c, err := New(Options{Registerer: prometheus.NewRegistry(), Logger: slog.New(slog.NewJSONHandler(&log, nil))})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := c.Sync(ctx, RedisTime(rdb)); err != nil {
		t.Fatal(err)
	}
	if st, want := c.Status(), runIDOf(t, first); st.Server != want || st.Samples != 3 {
		t.Fatalf("synced through the proxy: Server, Samples = %q, %d; want the first server's run_id %q, 3", st.Server, st.Samples, want)
	}

	proxy.switchTo(second.Options().Addr)
	want := runIDOf(t, second)
	wait.For(t, "a sample of the second server", func() error {
		if err := c.Sample(ctx, RedisTime(rdb)); err != nil {
			return err // the first calls on the cut connections fail: the clock keeps its samples
		}
		if st := c.Status(); st.Server != want {
			return fmt.Errorf("Server = %q, want %q", st.Server, want)
		}
		return nil
	})
	st := c.Status()
	if st.Samples != 1 {
		t.Errorf("after the switch Samples = %d, want 1: the first server's samples dropped", st.Samples)
	}
	before := c.Now()
	shared := redistest.Time(t, second)
	after := c.Now()
	slack := c.Status().Error + time.Microsecond
	if shared.Before(before.Add(-slack)) || shared.After(after.Add(slack)) {
		t.Errorf("the second server's TIME %v outside the clock's [%v, %v] ± %v", shared, before, after, slack)
	}
	if !strings.Contains(log.String(), `"event":"clock_server_changed"`) {
		t.Errorf("log = %s, want a clock_server_changed line", log.String())
	}
}

func runIDOf(t *testing.T, rdb *redis.Client) string {
	t.Helper()
	info, err := rdb.Info(context.Background(), "server").Result()
	if err != nil {
		t.Fatal(err)
	}
	id := runID(info)
	if id == "" {
		t.Fatalf("no run_id in INFO server: %q", info)
	}
	return id
}

// switchProxy forwards TCP connections to a target that the test can change; a change cuts
// the connections open to the old one, as a failover leaves a client's connections to the
// old primary dead.
type switchProxy struct {
	lis    net.Listener
	mu     sync.Mutex
	target string
	open   []net.Conn
}

func newSwitchProxy(t *testing.T, target string) *switchProxy {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &switchProxy{lis: l, target: target}
	t.Cleanup(func() { _ = l.Close(); p.switchTo("") })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			p.mu.Lock()
			target := p.target
			p.mu.Unlock()
			up, err := net.Dial("tcp", target)
			if err != nil {
				_ = c.Close()
				continue
			}
			p.mu.Lock()
			p.open = append(p.open, c, up)
			p.mu.Unlock()
			go func() { _, _ = io.Copy(up, c); _ = up.Close() }()
			go func() { _, _ = io.Copy(c, up); _ = c.Close() }()
		}
	}()
	return p
}

func (p *switchProxy) addr() string { return p.lis.Addr().String() }

// switchTo forwards new connections to target and closes those open.
func (p *switchProxy) switchTo(target string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.target = target
	for _, c := range p.open {
		_ = c.Close()
	}
	p.open = nil
}

// Until Now has returned a time after the first sample (Sync, before a service serves), a
// better sample is stepped to, back or forward: nothing has read the clock go back.
func TestSamplesBeforeTheFirstReadAreSteppedTo(t *testing.T) {
	t.Parallel()
	m := &manual{Manual: clocktest.New(time.Unix(1_000_000, 0)), skew: 5 * time.Second}
	c, _, _ := newTestClock(t, m, Options{})
	sampleOnce(t, c, m.source(50*time.Millisecond, 50*time.Millisecond))
	m.setSkew(5*time.Second - 100*time.Millisecond)
	sampleOnce(t, c, m.source(time.Millisecond, time.Millisecond))
	if st := c.Status(); st.Slewing != 0 || st.Offset != 5*time.Second-100*time.Millisecond {
		t.Errorf("Status Slewing, Offset = %v, %v; want 0, 4.9s (stepped to)", st.Slewing, st.Offset)
	}
}
