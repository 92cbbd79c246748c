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
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/vigil-dev/vigil/pkg/prom"
)

// Source reads the shared clock once.
type Source func(ctx context.Context) (time.Time, error)

// RedisTime is rdb's TIME: the clock of the server holding the service's data.
func RedisTime(rdb redis.UniversalClient) Source {
	return func(ctx context.Context) (time.Time, error) { return rdb.Time(ctx).Result() }
}

// Defaults of Options.
const (
	DefaultInterval  = 5 * time.Second
	DefaultKeep      = 12
	DefaultDrift     = 100e-6
	DefaultWarnAbove = time.Second
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
	cur    atomic.Pointer[sample] // the sample Now reads; nil before the first
	offset prometheus.Gauge
	bound  prometheus.Gauge

	mu       sync.Mutex
	samples  []sample // the last Keep, oldest first
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
// plus the base clock's time since. Before the first sample it is the base clock's.
func (c *Clock) Now() time.Time {
	b := c.o.Base()
	s := c.cur.Load()
	if s == nil {
		return b
	}
	return s.shared.Add(b.Sub(s.local))
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
	shared, err := src(ctx)
	t1 := c.o.Base()
	if err != nil {
		return err
	}
	rtt := max(t1.Sub(t0), 0)
	s := sample{local: t0.Add(rtt / 2), shared: shared, rtt: rtt}

	c.mu.Lock()
	defer c.mu.Unlock()
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
	c.cur.Store(&best)
	off := best.offset()
	c.offset.Set(off.Seconds())
	c.bound.Set(best.errorAt(t1, c.o.Drift).Seconds())
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
	// Error bounds how far Now may be from the shared clock.
	Error time.Duration
	// RTT is the round trip of the sample in use; Age how long ago it was taken.
	RTT, Age time.Duration
	// Samples is how many recent samples the choice looked at.
	Samples int
	// LastErr is the last sample's failure, nil when it succeeded.
	LastErr error
}

// Status reports the sample in use.
func (c *Clock) Status() Status {
	s := c.cur.Load()
	c.mu.Lock()
	defer c.mu.Unlock()
	if s == nil {
		return Status{LastErr: c.lastFail}
	}
	now := c.o.Base()
	return Status{
		Synced: true, Offset: s.offset(), Error: s.errorAt(now, c.o.Drift), RTT: s.rtt,
		Age: max(now.Sub(s.local), 0), Samples: len(c.samples), LastErr: c.lastFail,
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
