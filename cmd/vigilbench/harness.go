package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"os"
	"runtime"
	"runtime/pprof"
	"runtime/trace"
	"slices"
	"strings"
	"sync"
	"text/tabwriter"
	"time"
)

// Harness is what every benchmark shares: the common flags, the Redis under test (a throwaway
// redis-server unless --redis-url names one), a key prefix no other run uses, and the report.
type Harness struct {
	// Report collects the results; runHarness prints it.
	Report *benchReport
	// Prefix starts every key the run writes (removed afterwards from a shared Redis).
	Prefix string

	flags    benchFlags
	redis    *benchRedis
	stack    stack
	children children
}

// Redis is the Redis under test, started or connected on first use.
func (h *Harness) Redis(ctx context.Context) (*benchRedis, error) {
	if h.redis == nil {
		b, err := openBenchRedis(ctx, h.flags)
		if err != nil {
			return nil, err
		}
		h.redis = b
		h.Report.Redis = b.about
	}
	return h.redis, nil
}

// runHarness parses the common and the benchmark's flags, runs it, and prints its report.
func runHarness(ctx context.Context, name string, b Benchmark, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("vigilbench "+name, flag.ContinueOnError)
	fs.SetOutput(os.Stderr)
	h := &Harness{Report: newBenchReport(name), Prefix: benchPrefix()}
	h.flags.register(fs)
	before := benchLoadAverage()
	// A CPU profile and an execution trace of the whole run, when the environment asks.
	for _, rec := range []struct {
		env   string
		start func(io.Writer) error
		stop  func()
	}{
		{"VIGIL_BENCH_CPUPROFILE", pprof.StartCPUProfile, pprof.StopCPUProfile},
		{"VIGIL_BENCH_TRACE", trace.Start, trace.Stop},
	} {
		path := os.Getenv(rec.env)
		if path == "" {
			continue
		}
		f, err := os.Create(path)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := rec.start(f); err != nil {
			return fmt.Errorf("%s: %w", rec.env, err)
		}
		defer rec.stop()
	}
	defer func() {
		h.stack.stop() // the services before the Redis they use
		if h.redis != nil {
			h.redis.deletePrefix(context.WithoutCancel(ctx), h.Prefix)
			h.redis.close()
		}
	}()
	if err := b.Run(ctx, h, fs, args); err != nil {
		return err
	}
	rep := h.Report
	rep.note("load average (1 min) before %s, after %s on %d CPUs: other work on the machine skews every number", before, benchLoadAverage(), runtime.NumCPU())
	if h.flags.json {
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		return enc.Encode(rep)
	}
	rep.writeTable(out)
	return nil
}

// benchFlags are the flags every benchmark takes.
type benchFlags struct {
	redisURL string
	aof      string
	json     bool
}

func (f *benchFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.redisURL, "redis-url", "", "Redis to measure (redis://host:port/db); empty: start a throwaway redis-server child")
	fs.StringVar(&f.aof, "aof", "no", "AOF fsync policy of the throwaway redis-server: no (AOF off), everysec or always")
	fs.BoolVar(&f.json, "json", false, "print the results as JSON instead of a table")
}

// parseBenchFlags parses a benchmark's flags; -h prints them and ends the command quietly.
func parseBenchFlags(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%w: unexpected arguments %q", errUsage, fs.Args())
	}
	return nil
}

// benchReport is what a benchmark measured.
type benchReport struct {
	// Benchmark is the subcommand that ran.
	Benchmark string `json:"benchmark"`
	// Started is when the run began (RFC 3339).
	Started string `json:"started"`
	// Redis describes the Redis measured: version, address, persistence.
	Redis string `json:"redis"`
	// Settings are the knobs of the run.
	Settings map[string]any `json:"settings"`
	// Results in the order they were measured.
	Results []benchResult `json:"results"`
	// Tables are results with several measurements per row (one row per client or case),
	// printed after Results as Markdown tables.
	Tables []*benchTable `json:"tables,omitempty"`
	// Notes are caveats worth reading next to the numbers.
	Notes []string `json:"notes,omitempty"`
}

// benchResult is one measured number.
type benchResult struct {
	// Key is a stable machine name, e.g. "drain_throughput".
	Key string `json:"key"`
	// Name is the human description shown in the table.
	Name string `json:"name"`
	// Value in Unit.
	Value float64 `json:"value"`
	// Unit, e.g. "alarms/s", "ms", "x".
	Unit string `json:"unit"`
}

// benchTable is a table of measurements: a row per case, a column per measured figure.
type benchTable struct {
	// Key is a stable machine name, e.g. "contended".
	Key string `json:"key"`
	// Title is the human description printed above the table.
	Title string `json:"title"`
	// Columns name the figures of each row, in order.
	Columns []benchColumn `json:"columns"`
	// Rows in the order they were measured.
	Rows []benchRow `json:"rows"`
}

// benchColumn is one figure of a table's rows.
type benchColumn struct {
	// Name is the column's heading.
	Name string `json:"name"`
	// Unit of the column's values: "ms" prints as a duration, "x" as a ratio.
	Unit string `json:"unit"`
}

// benchRow is one case of a table.
type benchRow struct {
	// Name of the case, e.g. "vigil gRPC unary".
	Name string `json:"name"`
	// Values, one per column.
	Values []float64 `json:"values"`
}

// table adds an empty table to the report and returns it for rows.
func (r *benchReport) table(key, title string, columns ...benchColumn) *benchTable {
	t := &benchTable{Key: key, Title: title, Columns: columns}
	r.Tables = append(r.Tables, t)
	return t
}

// row adds a case with one value per column.
func (t *benchTable) row(name string, values ...float64) {
	t.Rows = append(t.Rows, benchRow{Name: name, Values: values})
}

func (t *benchTable) write(w io.Writer) {
	fmt.Fprintf(w, "%s\n\n| case |", t.Title)
	for _, c := range t.Columns {
		fmt.Fprintf(w, " %s |", c.Name)
	}
	fmt.Fprint(w, "\n| --- |")
	for range t.Columns {
		fmt.Fprint(w, " ---: |")
	}
	fmt.Fprintln(w)
	for _, row := range t.Rows {
		fmt.Fprintf(w, "| %s |", row.Name)
		for i, v := range row.Values {
			unit := ""
			if i < len(t.Columns) {
				unit = t.Columns[i].Unit
			}
			fmt.Fprintf(w, " %s |", benchFormatCell(v, unit))
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintln(w)
}

// benchFormatCell prints a table value: milliseconds as a rounded duration, ratios with two
// decimals, counts and rates as whole numbers.
func benchFormatCell(v float64, unit string) string {
	switch unit {
	case "ms":
		d := time.Duration(v * float64(time.Millisecond))
		switch {
		case d >= 100*time.Millisecond:
			return d.Round(time.Millisecond).String()
		case d >= time.Millisecond:
			return d.Round(10 * time.Microsecond).String()
		default:
			return d.Round(time.Microsecond).String()
		}
	case "x", "cores":
		return fmt.Sprintf("%.2f", v)
	default:
		return fmt.Sprintf("%.0f", v)
	}
}

func newBenchReport(name string) *benchReport {
	return &benchReport{Benchmark: name, Started: time.Now().UTC().Format(time.RFC3339), Settings: map[string]any{}}
}

func (r *benchReport) add(key, name string, value float64, unit string) {
	r.Results = append(r.Results, benchResult{Key: key, Name: name, Value: value, Unit: unit})
}

// addLatencies adds p50, p99 and max of samples (in ms).
func (r *benchReport) addLatencies(key, name string, l *benchLatencies) {
	r.add(key+"_p50_ms", name+" p50", l.percentile(50), "ms")
	r.add(key+"_p99_ms", name+" p99", l.percentile(99), "ms")
	r.add(key+"_max_ms", name+" max", l.percentile(100), "ms")
}

// ratio adds a/b as key (unit "x"), when b is not zero: the figure to compare between runs,
// since both sides moved with the machine's load in the same run.
func (r *benchReport) ratio(key, name string, a, b float64) {
	if b != 0 {
		r.add(key, name, a/b, "x")
	}
}

func (r *benchReport) note(format string, args ...any) {
	r.Notes = append(r.Notes, fmt.Sprintf(format, args...))
}

func (r *benchReport) writeTable(w io.Writer) {
	fmt.Fprintf(w, "vigilbench %s  (%s)\nredis: %s\n", r.Benchmark, r.Started, r.Redis)
	keys := slices.Sorted(maps.Keys(r.Settings))
	settings := make([]string, len(keys))
	for i, k := range keys {
		settings[i] = fmt.Sprintf("%s=%v", k, r.Settings[k])
	}
	fmt.Fprintf(w, "settings: %s\n\n", strings.Join(settings, " "))
	if len(r.Results) > 0 {
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "measurement\tvalue\tunit\t")
		for _, res := range r.Results {
			fmt.Fprintf(tw, "%s\t%s\t%s\t\n", res.Name, benchFormatValue(res.Value), res.Unit)
		}
		_ = tw.Flush()
		if len(r.Tables) > 0 {
			fmt.Fprintln(w)
		}
	}
	for _, t := range r.Tables {
		t.write(w)
	}
	for _, n := range r.Notes {
		fmt.Fprintf(w, "note: %s\n", n)
	}
}

func benchFormatValue(v float64) string {
	switch {
	case v >= 1000:
		return benchGroupThousands(fmt.Sprintf("%.0f", v))
	case v >= 100:
		return fmt.Sprintf("%.1f", v)
	default:
		return fmt.Sprintf("%.3f", v)
	}
}

func benchGroupThousands(s string) string {
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return b.String()
}

// benchLatencies collects durations from many goroutines and reports percentiles in ms.
type benchLatencies struct {
	mu     sync.Mutex
	ms     []float64
	sorted bool
}

func (l *benchLatencies) add(d time.Duration) {
	l.mu.Lock()
	l.ms = append(l.ms, float64(d)/float64(time.Millisecond))
	l.sorted = false
	l.mu.Unlock()
}

// merge adds o's latencies to l.
func (l *benchLatencies) merge(o *benchLatencies) {
	o.mu.Lock()
	ms := slices.Clone(o.ms)
	o.mu.Unlock()
	l.mu.Lock()
	l.ms = append(l.ms, ms...)
	l.sorted = false
	l.mu.Unlock()
}

func (l *benchLatencies) len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.ms)
}

// percentile p in [0,100] by the nearest-rank method; 0 when empty.
func (l *benchLatencies) percentile(p float64) float64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.ms) == 0 {
		return 0
	}
	if !l.sorted {
		slices.Sort(l.ms)
		l.sorted = true
	}
	rank := int(p/100*float64(len(l.ms))+0.999999) - 1
	return l.ms[min(max(rank, 0), len(l.ms)-1)]
}

// benchProgress prints a status line to stderr every interval until stop is called.
func benchProgress(every time.Duration, line func() string) (stop func()) {
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				fmt.Fprintln(os.Stderr, "  "+line())
			}
		}
	}()
	var once sync.Once
	return func() { once.Do(func() { close(done); <-finished }) }
}

// benchLoadAverage is the 1-minute load average, or "?" where /proc/loadavg is missing.
func benchLoadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	if f := strings.Fields(string(b)); len(f) > 0 {
		return f[0]
	}
	return "?"
}

// benchStage announces a benchmark stage on stderr.
func benchStage(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "vigilbench: "+format+"\n", args...)
}

// benchPrefix is a key prefix no other run uses, so a shared Redis is left as it was found.
func benchPrefix() string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return "vigil-bench-" + hex.EncodeToString(b[:])
}
