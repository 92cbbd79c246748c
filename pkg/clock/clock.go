// Package clock gives a service one clock for the data it shares with its other replicas: the
// local clock disciplined to its Redis's TIME. Every time decision a Vigil service makes (a
// lock's lease end, a hold's expiry, a room's idle expiry, a session's lease, an alarm's due
// time) is a comparison between a time one replica wrote into Redis and a time another one
// reads from its own clock; with two replicas whose hosts disagree by 30s, a hold written by
// one expires 30s early on the other. Disciplined, both read Redis's time, give or take a
// measured error bound.
//
// A Clock samples the shared clock (Source: Redis's TIME) every Interval. A sample is
// (t0, shared, t1): the base clock read before the call, the shared time it answered, the
// base clock read after it. The shared time was read at some moment between t0 and t1, so
// the best guess of the offset is shared − (t0 + rtt/2), wrong by at most rtt/2. The Clock
// keeps the last Keep samples and uses the one whose error bound is smallest now: its rtt/2
// plus Drift for every second since it was taken (the local clock may run a little fast or
// slow in between). Network jitter only ever makes a round trip longer, so the shortest
// recent one is the most trustworthy, the filter NTP's clock selection also starts with.
//
// Now is then the chosen sample's shared time plus the base clock's elapsed time since it:
// with time.Now as the base, that is Go's monotonic reading, so a step of the host's wall
// clock between samples does not move Now.
//
// Now never goes back: from the first sample on, it never returns a time earlier than one it
// returned before, in any goroutine. A better sample that puts the shared clock ahead is taken
// at once (Now steps forward); one that puts it behind what Now has been reading is not
// stepped to (unless Now has not been read since the first sample, as in Sync): Now runs slow by Slew (5 %: a 100 ms step back is absorbed in 2 s) until it
// meets the new estimate, and the error bound counts what is left to absorb meanwhile. The
// clock slows down, it never stops.
//
// After a failover (Sentinel promoting a replica) or a restart of Redis, the connection
// reaches another server, whose clock is not the one the kept samples measured. RedisTime
// reads the server's run_id with each TIME (one pipeline, one server): when it changes, the
// samples of the old server are dropped and the new server's clock is followed from its first
// sample (through the slew above when it is behind). Samples are taken every Interval through
// the same client as the service's data, so a failover client's switch to the new primary is
// followed within one Interval.
//
// On Redis Cluster each TIME is answered by whichever master the client picks, and masters'
// hosts disagree by their own NTP error (usually well under a millisecond, but not zero): a
// key's data is only ever compared against one master's writes, yet the samples mix masters.
// Keep the masters' clocks synchronised; the offset then follows their common time.
package clock

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/vigil-dev/vigil/pkg/prom"
)

// Source reads the shared clock once.
type Source func(ctx context.Context) (Reading, error)

// Reading is one answer of the shared clock.
type Reading struct {
	// Time is the shared clock's time.
	Time time.Time
	// Server names the server that answered (Redis's run_id); "" where the source cannot tell.
	// When it changes, the samples kept so far measured another server's clock and are dropped.
	Server string
}

// RedisTime is rdb's TIME: the clock of the server holding the service's data, with its
// run_id (INFO server, in the same pipeline, so answered by the same server). On Redis
// Cluster, where each TIME may be answered by another master, and where INFO is refused (an
// ACL without it), the server is not named.
func RedisTime(rdb redis.UniversalClient) Source {
	if _, ok := rdb.(*redis.ClusterClient); ok {
		return func(ctx context.Context) (Reading, error) {
			t, err := rdb.Time(ctx).Result()
			return Reading{Time: t}, err
		}
	}
	return func(ctx context.Context) (Reading, error) {
		var tc *redis.TimeCmd
		var info *redis.StringCmd
		// TIME first: the time is read before INFO's work, within the round trip Sample times.
		_, _ = rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
			tc = p.Time(ctx)
			info = p.Info(ctx, "server")
			return nil
		})
		t, err := tc.Result()
		if err != nil {
			return Reading{}, err
		}
		return Reading{Time: t, Server: runID(info.Val())}, nil
	}
}

// runID is the run_id line of INFO server's answer; "" when there is none.
func runID(info string) string {
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "run_id:"); ok {
			return v
		}
	}
	return ""
}

// Defaults of Options.
const (
	DefaultInterval  = 5 * time.Second
	DefaultKeep      = 12
	DefaultDrift     = 100e-6
	DefaultWarnAbove = time.Second
	DefaultSlew      = 0.05
	// startSamples is how many samples Sync takes, so that the first estimate already has the
	// best of a few round trips.
	startSamples = 3
)

// Options configure a Clock. Every zero value has the default given in its comment.
type Options struct {
	// Base is the local clock being disciplined. Default time.Now. Tests inject a skewed or
	// fake one.
	Base func() time.Time
	// Interval between samples of the shared clock. Default DefaultInterval (5s).
	Interval time.Duration
	// Keep is how many recent samples the choice of the best one looks at. Default
	// DefaultKeep (12: a minute at 5s).
	Keep int
	// Drift is how fast the base clock may run away from the shared one, in seconds per
	// second; it ages a sample's error bound. Default DefaultDrift (100 ppm, ten times what an
	// NTP-synchronised host's crystal does).
	Drift float64
	// WarnAbove: a base clock further than this from the shared one is reported (a warning in
	// the log, Check's error). Time decisions stay right, through the offset; the host's
	// clock (its NTP) needs fixing. Default DefaultWarnAbove (1s).
	WarnAbove time.Duration
	// Slew is how much slower than the base clock Now runs while it absorbs a step back (a
	// better sample, or a new server, putting the shared clock behind what Now has read), as a
	// fraction: 0.05 runs at 95 % of the base clock's rate. Default DefaultSlew (0.05); New
	// refuses 1 or more (a clock that stops or runs back).
	Slew float64
	// Service names the service in the log and the gauges' "service" label. Default "vigil".
	Service string
	// Logger for the warning and failed samples. Default slog.Default().
	Logger *slog.Logger
	// Registerer takes vigil_clock_offset_seconds and vigil_clock_error_seconds. Default
	// prometheus.DefaultRegisterer.
	Registerer prometheus.Registerer
}

// Clock is a base clock disciplined to a shared one. Its Now is safe for concurrent use.
type Clock struct {
	o      Options
	cur    atomic.Pointer[mapping] // how Now reads the base clock; nil before the first sample
	last   atomic.Int64            // the latest time Now returned, in Unix nanoseconds
	offset prometheus.Gauge
	bound  prometheus.Gauge

	mu       sync.Mutex
	samples  []sample // the last Keep, oldest first, all from server
	server   string   // the server the samples measured ("" unknown)
	warned   bool     // the offset is beyond WarnAbove and was logged
	failing  bool     // the last sample failed and was logged
	lastFail error
}

// sample is one reading of the shared clock.
type sample struct {
	local  time.Time     // the base clock halfway through the exchange (t0 + rtt/2)
	shared time.Time     // the shared clock's answer
	rtt    time.Duration // t1 − t0
}

// mapping is how Now reads the base clock: the chosen sample's time, plus what is left of a
// step back not taken (excess, as of the base clock reading since), shrinking by slew per
// second.
type mapping struct {
	s      sample
	excess time.Duration
	since  time.Time
	slew   float64
}

// at is Now's reading when the base clock reads b.
func (m *mapping) at(b time.Time) time.Time {
	return m.s.shared.Add(b.Sub(m.s.local)).Add(m.remaining(b))
}

// remaining is what is left of the step back when the base clock reads b.
func (m *mapping) remaining(b time.Time) time.Duration {
	if m.excess <= 0 {
		return 0
	}
	return max(m.excess-time.Duration(m.slew*float64(max(b.Sub(m.since), 0))), 0)
}

// offset is shared − local: positive when the base clock is behind the shared one.
func (s sample) offset() time.Duration { return s.shared.Sub(s.local.Round(0)) }

// errorAt is the sample's error bound when the base clock reads now.
func (s sample) errorAt(now time.Time, drift float64) time.Duration {
	age := max(now.Sub(s.local), 0)
	return s.rtt/2 + time.Duration(math.Round(drift*float64(age)))
}

// New is a Clock on o.Base that reads Base unchanged until Sync has taken a sample.
func New(o Options) (*Clock, error) {
	if o.Base == nil {
		o.Base = time.Now
	}
	if o.Interval <= 0 {
		o.Interval = DefaultInterval
	}
	if o.Keep <= 0 {
		o.Keep = DefaultKeep
	}
	if o.Drift <= 0 {
		o.Drift = DefaultDrift
	}
	if o.WarnAbove <= 0 {
		o.WarnAbove = DefaultWarnAbove
	}
	if o.Slew <= 0 {
		o.Slew = DefaultSlew
	}
	if o.Slew >= 1 {
		return nil, fmt.Errorf("clock: Slew is %v: a clock absorbing a step back at that rate would stop or run back; give a fraction below 1, such as %v", o.Slew, DefaultSlew)
	}
	if o.Service == "" {
		o.Service = "vigil"
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	offset, err := prom.Register(o.Registerer, prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "vigil_clock_offset_seconds",
		Help: "The shared clock (Redis's TIME) minus this replica's clock, as the best recent sample measured it: positive when this replica's clock is behind. Time decisions add it; beyond the warning bound the host's clock needs fixing.",
	}, []string{"service"}))
	if err != nil {
		return nil, fmt.Errorf("clock: %w", err)
	}
	bound, err := prom.Register(o.Registerer, prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "vigil_clock_error_seconds",
		Help: "How far this replica's disciplined clock may be from the shared one: half the best sample's round trip, plus the drift allowed since it was taken.",
	}, []string{"service"}))
	if err != nil {
		return nil, fmt.Errorf("clock: %w", err)
	}
	return &Clock{o: o, offset: offset.WithLabelValues(o.Service), bound: bound.WithLabelValues(o.Service)}, nil
}

// Now is the shared clock's time as this replica knows it: the chosen sample's shared time
// plus the base clock's time since, and what is left of a step back being absorbed. It is
// never earlier than a time it returned before. Before the first sample it is the base
// clock's (the services Sync before they serve).
func (c *Clock) Now() time.Time {
	b := c.o.Base()
	m := c.cur.Load()
	if m == nil {
		return b
	}
	t := m.at(b)
	n := t.UnixNano()
	for {
		// Two callers may read the base clock in one order and the mapping in the other (a
		// sample adopted between): the later one returns at least the earlier one's time.
		last := c.last.Load()
		if n <= last {
			return time.Unix(0, last)
		}
		if c.last.CompareAndSwap(last, n) {
			return t
		}
	}
}

// Sync takes the first samples (a few, keeping the best); call it before serving. It fails
// only when none succeeded.
func (c *Clock) Sync(ctx context.Context, src Source) error {
	var err error
	ok := false
	for range startSamples {
		if e := c.Sample(ctx, src); e != nil {
			err = e
			continue
		}
		ok = true
	}
	if !ok {
		return fmt.Errorf("clock: the shared clock did not answer: %w", err)
	}
	return nil
}

// Run samples src every Interval until ctx ends. A failed sample keeps the last good ones
// (their error bound grows with their age) and is logged once until one succeeds again.
func (c *Clock) Run(ctx context.Context, src Source) error {
	tick := time.NewTicker(c.o.Interval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
		sctx, cancel := context.WithTimeout(ctx, c.o.Interval)
		err := c.Sample(sctx, src)
		cancel()
		if ctx.Err() != nil {
			return nil
		}
		c.mu.Lock()
		c.lastFail = err
		switch {
		case err != nil && !c.failing:
			c.failing = true
			c.o.Logger.Warn("the shared clock did not answer; the last samples stand", "event", "clock_sample_failed",
				"service", c.o.Service, "err", err.Error())
		case err == nil && c.failing:
			c.failing = false
			c.o.Logger.Info("the shared clock answers again", "event", "clock_sample_ok", "service", c.o.Service)
		}
		c.mu.Unlock()
	}
}

// Sample reads src once and, if it answered, makes the best recent sample the one Now reads.
func (c *Clock) Sample(ctx context.Context, src Source) error {
	t0 := c.o.Base()
	r, err := src(ctx)
	t1 := c.o.Base()
	if err != nil {
		return err
	}
	rtt := max(t1.Sub(t0), 0)
	s := sample{local: t0.Add(rtt / 2), shared: r.Time, rtt: rtt}

	c.mu.Lock()
	defer c.mu.Unlock()
	if r.Server != "" {
		if c.server != "" && r.Server != c.server {
			// A failover or a restart: the kept samples measured a clock no longer read.
			c.samples = c.samples[:0]
			c.o.Logger.Info("the shared clock is another server's now; following it from its first sample", "event", "clock_server_changed",
				"service", c.o.Service, "was", c.server, "now", r.Server)
		}
		c.server = r.Server
	}
	c.samples = append(c.samples, s)
	if len(c.samples) > c.o.Keep {
		c.samples = c.samples[len(c.samples)-c.o.Keep:]
	}
	best := c.samples[0]
	for _, x := range c.samples[1:] {
		if x.errorAt(t1, c.o.Drift) <= best.errorAt(t1, c.o.Drift) {
			best = x
		}
	}
	next := &mapping{s: best, since: t1, slew: c.o.Slew}
	if prev := c.cur.Load(); prev != nil && c.last.Load() != 0 {
		// Now has been reading prev; a new estimate behind it is not stepped to but slewed.
		// (Until Now has returned a time, as during Sync, nothing can have read it go back.)
		was := prev.at(t1)
		if last := time.Unix(0, c.last.Load()); last.After(was) {
			was = last // a reading Now returned meanwhile, on prev
		}
		if back := was.Sub(best.shared.Add(t1.Sub(best.local))); back > 0 {
			next.excess = back
		}
	}
	c.cur.Store(next)
	off := best.offset()
	c.offset.Set(off.Seconds())
	c.bound.Set((best.errorAt(t1, c.o.Drift) + next.excess).Seconds())
	switch beyond := abs(off) > c.o.WarnAbove; {
	case beyond && !c.warned:
		c.warned = true
		c.o.Logger.Warn(describe(off, c.o.WarnAbove), "event", "clock_offset", "service", c.o.Service,
			"offsetSeconds", off.Seconds(), "warnAboveSeconds", c.o.WarnAbove.Seconds())
	case !beyond && c.warned:
		c.warned = false
		c.o.Logger.Info("this replica's clock agrees with Redis's TIME again", "event", "clock_offset_ok",
			"service", c.o.Service, "offsetSeconds", off.Seconds())
	}
	return nil
}

// Status is what a Clock knows of its offset.
type Status struct {
	// Synced is false before the first sample; the rest is then zero.
	Synced bool
	// Offset is the shared clock minus the base clock: positive when the base is behind.
	Offset time.Duration
	// Error bounds how far Now may be from the shared clock: the sample's error bound, plus
	// Slewing.
	Error time.Duration
	// Slewing is what is left of a step back being absorbed: Now reads that much ahead of the
	// best estimate, and runs slow by Options.Slew until it is zero.
	Slewing time.Duration
	// Server is the server whose clock the samples measured (Redis's run_id); "" unknown.
	Server string
	// RTT is the round trip of the sample in use; Age how long ago it was taken.
	RTT, Age time.Duration
	// Samples is how many recent samples the choice looked at.
	Samples int
	// LastErr is the last sample's failure, nil when it succeeded.
	LastErr error
}

// Status reports the sample in use.
func (c *Clock) Status() Status {
	m := c.cur.Load()
	c.mu.Lock()
	defer c.mu.Unlock()
	if m == nil {
		return Status{LastErr: c.lastFail}
	}
	now := c.o.Base()
	s, slewing := m.s, m.remaining(now)
	return Status{
		Synced: true, Offset: s.offset(), Error: s.errorAt(now, c.o.Drift) + slewing, Slewing: slewing, Server: c.server,
		RTT: s.rtt, Age: max(now.Sub(s.local), 0), Samples: len(c.samples), LastErr: c.lastFail,
	}
}

// Check is nil while the base clock is within WarnAbove of the shared one, else a sentence
// saying how far off it is and what to do (for a health endpoint).
func (c *Clock) Check() error {
	st := c.Status()
	if !st.Synced {
		return fmt.Errorf("clock: no sample of Redis's TIME yet")
	}
	if abs(st.Offset) > c.o.WarnAbove {
		return fmt.Errorf("clock: %s", describe(st.Offset, c.o.WarnAbove))
	}
	return nil
}

// describe says how far the base clock is from the shared one, to a tenth of the bound (at
// least a millisecond): the offset is an estimate within a round trip, so "30s ahead" says
// what an operator needs where "29.999s" would claim a precision it does not have.
func describe(offset, bound time.Duration) string {
	dir := "behind"
	if offset < 0 {
		dir = "ahead of"
	}
	return fmt.Sprintf("this replica's clock is %s %s Redis's TIME (more than %s): its time decisions use Redis's time, but the host's clock needs fixing (NTP)",
		abs(offset).Round(max(bound/10, time.Millisecond)), dir, bound)
}

func abs(d time.Duration) time.Duration {
	if d < 0 {
		return -d
	}
	return d
}
