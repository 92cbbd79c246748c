package main

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// The gateway's heap under steady REST load through one replica of a service: the default
// deployment (one replica of each service) keeps one connection per backend with one address,
// and whatever the gateway keeps per call and never frees shows as a live heap that grows with
// the calls made. The gateway runs as a process of its own with GODEBUG=gctrace=1, and its live
// heap is read from each collection's trace line (the heap marked live, "A->B->C MB": C), so
// the figure is the gateway's alone, after a collection, with no endpoint added to it. -before
// names another checkout (a worktree of an earlier commit): its gateway runs beside this one's,
// in front of the same service and Redis, under the same load, in the same minutes.

type heapBench struct {
	duration, warm time.Duration
	window         time.Duration
	rate           int
	concurrency    int
	waiters        int
	before         string
}

func benchGatewayHeap(ctx context.Context, h *Harness, fs *flag.FlagSet, args []string) error {
	var o heapBench
	fs.DurationVar(&o.duration, "duration", 10*time.Minute, "how long the load runs")
	fs.DurationVar(&o.warm, "warm", 30*time.Second, "the first part of the run, after which the starting heap is read")
	fs.DurationVar(&o.window, "window", 30*time.Second, "the collections whose median live heap is the starting one (after -warm) and the ending one (the run's last)")
	fs.IntVar(&o.rate, "rate", 0, "REST calls a second offered to each gateway (GET /locks/{resource}, a read through the locks service); 0: each caller sends its next call once the last is answered")
	fs.IntVar(&o.concurrency, "concurrency", 16, "callers per gateway: more than one, so the gateway's calls to the service overlap")
	fs.IntVar(&o.waiters, "waiters", 2, "lock acquires kept waiting (waitMs 10000, or a quarter of -duration if less, on a lock held for the run, staggered; sent sampled for tracing, so each is a unary call of the gateway's, not a message on its lock session) beside the reads, so some call to the service is open at every moment; 0: reads only")
	fs.StringVar(&o.before, "before", "", "another Vigil checkout (git worktree add /tmp/before <commit>) whose gateway is measured beside this one's")
	if err := parseBenchFlags(fs, args); err != nil {
		return err
	}
	if o.window <= 0 || o.duration < o.warm+o.window || o.rate < 0 || o.concurrency < 2 {
		return fmt.Errorf("%w: -window must be positive, -duration at least -warm plus -window, -rate 0 or more and -concurrency 2 or more", errUsage)
	}
	rep := h.Report
	rep.Settings["duration"] = o.duration.String()
	rep.Settings["rate"] = o.rate
	rep.Settings["concurrency"] = o.concurrency
	rep.Settings["waiters"] = o.waiters
	rb, err := h.Redis(ctx)
	if err != nil {
		return err
	}
	bins, cleanup, err := buildCommands(ctx, "services/locks/cmd/locks", "gateway/cmd/gateway")
	if err != nil {
		return err
	}
	h.stack.onStop(cleanup)
	variants := []struct{ name, bin string }{{"this checkout", bins[1]}}
	if o.before != "" {
		b, cleanupBefore, err := buildCommandsAt(ctx, o.before, "gateway/cmd/gateway")
		if err != nil {
			return err
		}
		h.stack.onStop(cleanupBefore)
		variants = append([]struct{ name, bin string }{{"before (" + o.before + ")", b[0]}}, variants...)
		rep.Settings["before"] = o.before
	}
	locksAddr, err := freeAddr()
	if err != nil {
		return err
	}
	if err := h.Process(ctx, "locks", bins[0], locksAddr, "-grpc-addr", locksAddr, "-redis-url", rb.url, "-prefix", h.Prefix,
		"-metrics-addr", "", "-log-format", "text", "-log-level", "warn"); err != nil {
		return err
	}
	type running struct {
		name  string
		gw    string
		trace *gcTrace
		calls atomic.Int64
		waits atomic.Int64 // the waiters' acquires, each open 10 s
		fails atomic.Int64
		last  atomic.Value // the last failure, a string
	}
	deadAddr, err := freeAddr() // where the gateways' traces go: nowhere
	if err != nil {
		return err
	}
	var gws []*running
	for _, v := range variants {
		addr, err1 := freeAddr()
		metrics, err2 := freeAddr()
		if err1 != nil || err2 != nil {
			return fmt.Errorf("free ports: %v %v", err1, err2)
		}
		tr := newGCTrace(os.Stderr)
		env := []string{"GODEBUG=gctrace=1"}
		if o.waiters > 0 {
			// The gateway relays lock writes over session streams, except a traced one, which
			// is a unary call of its own: tracing on (to an address nothing listens on), no
			// request sampled but those that arrive sampled (the waiters').
			env = append(env, "OTEL_EXPORTER_OTLP_ENDPOINT=http://"+deadAddr, "OTEL_EXPORTER_OTLP_INSECURE=true",
				"OTEL_TRACES_SAMPLER=parentbased_traceidratio", "OTEL_TRACES_SAMPLER_ARG=0")
		}
		if err := h.process(ctx, "gateway", v.bin, addr, env, tr, "-addr", addr, "-metrics-addr", metrics,
			"-locks-addr", locksAddr, "-rate-limit", "-1", "-log-format", "text", "-log-level", "warn"); err != nil {
			return err
		}
		r := &running{name: v.name, gw: "http://" + addr, trace: tr}
		if err := waitHTTP(ctx, benchHTTPClient(), r.gw+"/healthz"); err != nil {
			return err
		}
		gws = append(gws, r)
	}
	benchStage("%d gateway(s) in front of one locks replica on %s; %d calls/s each by %d callers for %v", len(gws), locksAddr, o.rate, o.concurrency, o.duration)

	start := time.Now()
	end := start.Add(o.duration)
	var period time.Duration
	if o.rate > 0 {
		period = time.Second / time.Duration(o.rate)
	}
	var wg sync.WaitGroup
	waitFor := min(10*time.Second, o.duration/4) // each waiter's acquire
	for _, r := range gws {
		if o.waiters > 0 {
			// The lock the waiters wait on, held for the run (an hour at most).
			wc := tracedClient{base: r.gw, c: benchHTTPClient()}
			code, body, err := wc.do(ctx, "POST", "/locks/heap-held/acquire", `{"owner":"holder","ttlMs":3600000}`)
			if err != nil || code != 200 || !strings.Contains(string(body), `"acquired":true`) {
				return fmt.Errorf("%s: hold the waiters' lock: %d %s %v", r.name, code, body, err)
			}
			for w := range o.waiters {
				wg.Add(1)
				go func() {
					defer wg.Done()
					time.Sleep(time.Duration(w) * waitFor / time.Duration(o.waiters)) // staggered, so one is always waiting
					for ctx.Err() == nil && time.Now().Before(end) {
						code, body, err := wc.do(ctx, "POST", "/locks/heap-held/acquire", fmt.Sprintf(`{"owner":"waiter-%d","waitMs":%d}`, w, waitFor.Milliseconds()))
						r.waits.Add(1)
						if err != nil || code != 200 {
							r.fails.Add(1)
							r.last.Store(fmt.Sprintf("a waiter's acquire: %d %s %v", code, body, err))
						}
					}
				}()
			}
		}
		rc := newRestClient(r.gw, o.concurrency)
		var next atomic.Int64
		for w := range o.concurrency {
			wg.Add(1)
			go func() {
				defer wg.Done()
				path := fmt.Sprintf("/locks/heap-%d", w)
				for {
					if ctx.Err() != nil || !time.Now().Before(end) {
						return
					}
					if period > 0 {
						due := start.Add(time.Duration(next.Add(1)) * period)
						if due.After(end) {
							return
						}
						if d := time.Until(due); d > 0 {
							time.Sleep(d) // pacing the offered load, not waiting for a condition
						}
					}
					code, body, err := rc.do(ctx, "GET", path, "")
					r.calls.Add(1)
					if err != nil || code != 200 {
						r.fails.Add(1)
						r.last.Store(fmt.Sprintf("%d %s %v", code, body, err))
					}
				}
			}()
		}
	}
	stopProgress := benchProgress(30*time.Second, func() string {
		line := fmt.Sprintf("%v:", time.Since(start).Round(time.Second))
		for _, r := range gws {
			line += fmt.Sprintf(" [%s: %d calls, %d failed, live heap %s MB]", r.name, r.calls.Load(), r.fails.Load(), r.trace.lastLive())
		}
		return line + " load " + benchLoadAverage()
	})
	wg.Wait()
	stopProgress()
	finished := time.Now() // after end when the calls fell behind their pace
	elapsed := finished.Sub(start)

	t := rep.table("heap", "the gateway's live heap after a collection (GODEBUG=gctrace=1), REST load through one replica",
		benchColumn{"calls", "calls"}, benchColumn{"failed", "calls"}, benchColumn{"heap at warm", "MB"}, benchColumn{"heap at end", "MB"},
		benchColumn{"growth", "MB"}, benchColumn{"per million calls", "MB"}, benchColumn{"GCs", "n"})
	for _, r := range gws {
		// The median of the collections in a 30 s window: one collection's figure is whole MB
		// and catches whatever a burst of calls held at that moment.
		first := r.trace.medianLive(start.Add(o.warm), start.Add(o.warm+o.window))
		last := r.trace.medianLive(finished.Add(-o.window), finished)
		calls := r.calls.Load()
		growth := last - first
		t.row(r.name, float64(calls), float64(r.fails.Load()), first, last, growth, growth/(float64(calls)/1e6), float64(r.trace.count()))
		if f := r.fails.Load(); f > 0 {
			rep.note("%s: %d calls failed, the last: %v", r.name, f, r.last.Load())
		}
	}
	offered := fmt.Sprintf("%d calls/s", o.rate)
	if o.rate == 0 {
		offered = "calls back to back"
	}
	if o.waiters > 0 {
		rep.note("beside the reads, %d lock acquires at a time waited %v each on a lock held for the run (%d per gateway in all), so some unary call of the gateway's to the service was open at every moment (the acquires carried a sampled traceparent, which makes the gateway send them as unary calls rather than on its lock sessions; the gateways ran with tracing on, to an address nothing listens on, sampling nothing else)", o.waiters, waitFor, gws[0].waits.Load())
	}
	rep.note("each gateway offered %s by %d callers for %v (%v measured); the heap at warm is the median live heap of the collections %v-%v into the run, at end that of the last %v; gctrace reports whole MB", offered, o.concurrency, o.duration, elapsed.Round(time.Second), o.warm, o.warm+o.window, o.window)
	return nil
}

// gcTrace reads a Go process's stderr: GODEBUG=gctrace=1 lines are kept as (when read, live
// heap), everything else is passed to out.
type gcTrace struct {
	pw  *io.PipeWriter
	mu  sync.Mutex
	gcs []gcLine
}

type gcLine struct {
	at     time.Time
	liveMB float64
}

// gctraceLine matches "gc 12 @3.456s 1%: ... ms cpu, 4->4->2 MB, ...": C of A->B->C is the heap
// marked live.
var gctraceLine = regexp.MustCompile(`^gc \d+ @[\d.]+s \d+%: .* (\d+)->(\d+)->(\d+) MB`)

func newGCTrace(out io.Writer) *gcTrace {
	pr, pw := io.Pipe()
	g := &gcTrace{pw: pw}
	go func() {
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			line := sc.Text()
			if m := gctraceLine.FindStringSubmatch(line); m != nil {
				live, _ := strconv.ParseFloat(m[3], 64)
				g.mu.Lock()
				g.gcs = append(g.gcs, gcLine{time.Now(), live})
				g.mu.Unlock()
				continue
			}
			fmt.Fprintln(out, line)
		}
		_, _ = io.Copy(io.Discard, pr)
	}()
	return g
}

func (g *gcTrace) Write(p []byte) (int, error) { return g.pw.Write(p) }

func (g *gcTrace) count() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.gcs)
}

func (g *gcTrace) lastLive() string {
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.gcs) == 0 {
		return "?"
	}
	return strconv.FormatFloat(g.gcs[len(g.gcs)-1].liveMB, 'f', 0, 64)
}

// medianLive is the median live heap of the collections between from and to; 0 when none.
func (g *gcTrace) medianLive(from, to time.Time) float64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	return median(g.gcs, from, to)
}

func median(ls []gcLine, from, to time.Time) float64 {
	var v []float64
	for _, l := range ls {
		if !l.at.Before(from) && !l.at.After(to) {
			v = append(v, l.liveMB)
		}
	}
	if len(v) == 0 {
		return 0
	}
	slices.Sort(v)
	return v[len(v)/2]
}

// tracedClient sends REST requests that carry a sampled W3C traceparent.
type tracedClient struct {
	base string
	c    *http.Client
}

func (tc tracedClient) do(ctx context.Context, method, path, body string) (int, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, method, tc.base+path, strings.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	var id [24]byte
	_, _ = rand.Read(id[:])
	req.Header.Set("traceparent", "00-"+hex.EncodeToString(id[:16])+"-"+hex.EncodeToString(id[16:])+"-01")
	res, err := tc.c.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer res.Body.Close()
	raw, err := io.ReadAll(res.Body)
	return res.StatusCode, raw, err
}
