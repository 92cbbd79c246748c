package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/vigil-dev/vigil/pkg/redistest"
	"github.com/vigil-dev/vigil/pkg/wait"
)

func TestParseRedisBenchmarkCSV(t *testing.T) {
	t.Parallel()
	out := `"test","rps","avg_latency_ms","min_latency_ms","p50_latency_ms","p95_latency_ms","p99_latency_ms","max_latency_ms"
"EVALSHA 615759c92792ea6b11fe41f39aead4d581766c1c 1 bench:{x}:__rand_int__ held held","84033.61","0.390","0.064","0.327","0.703","0.999","2.495"
`
	c, err := parseRedisBenchmarkCSV(out, 16)
	if err != nil {
		t.Fatalf("parseRedisBenchmarkCSV: %v", err)
	}
	if c.rps != 84033.61 || c.p50 != 0.327 || c.p99 != 0.999 || c.pipeline != 16 {
		t.Fatalf("parseRedisBenchmarkCSV = %+v, want rps 84033.61, p50 0.327, p99 0.999, pipeline 16", c)
	}
	for _, bad := range []string{"", "ERR unknown command\n", `"test","avg_latency_ms"` + "\n" + `"x","1"` + "\n"} {
		if _, err := parseRedisBenchmarkCSV(bad, 1); err == nil {
			t.Errorf("parseRedisBenchmarkCSV(%q) = nil error, want one", bad)
		}
	}
}

func TestBenchLatenciesPercentiles(t *testing.T) {
	t.Parallel()
	var l benchLatencies
	if got := l.percentile(99); got != 0 {
		t.Fatalf("percentile of nothing = %v, want 0", got)
	}
	for i := 100; i >= 1; i-- { // 1..100 ms, added out of order
		l.add(time.Duration(i) * time.Millisecond)
	}
	for _, tc := range []struct{ p, want float64 }{{0, 1}, {50, 50}, {99, 99}, {100, 100}} {
		if got := l.percentile(tc.p); got != tc.want {
			t.Errorf("percentile(%v) = %v, want %v", tc.p, got, tc.want)
		}
	}
	l.add(1000 * time.Millisecond) // re-sorts after a late sample
	if got := l.percentile(100); got != 1000 {
		t.Errorf("percentile(100) after adding 1s = %v, want 1000", got)
	}
}

func TestBenchReportRendersTableAndJSON(t *testing.T) {
	t.Parallel()
	rep := newBenchReport("alarms")
	rep.Redis = "redis 7.0.15 at redis://127.0.0.1:1/0"
	rep.Settings["count"] = 100000
	rep.add("drain_throughput", "drain throughput", 123456.7, "alarms/s")
	rep.add("drain_lateness_p99_ms", "drain lateness p99", 1.25, "ms")
	rep.note("target drain >= unpipelined EVALSHA rate: met")

	var table bytes.Buffer
	rep.writeTable(&table)
	for _, want := range []string{"count=100000", "drain throughput", "123,457", "alarms/s", "1.250", "note: target drain"} {
		if !strings.Contains(table.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, table.String())
		}
	}
	raw, err := json.Marshal(rep)
	if err != nil {
		t.Fatalf("json.Marshal: %v", err)
	}
	var back benchReport
	if err := json.Unmarshal(raw, &back); err != nil || len(back.Results) != 2 || back.Results[0].Key != "drain_throughput" || back.Results[0].Value != 123456.7 {
		t.Fatalf("JSON round trip = %+v, %v; want the two results back", back, err)
	}
}

func TestBenchReportRendersRowTables(t *testing.T) {
	t.Parallel()
	rep := newBenchReport("locks")
	tb := rep.table("contended", "Contended: one resource", benchColumn{"pairs/s", "pairs/s"}, benchColumn{"p99", "ms"}, benchColumn{"× redislock", "x"})
	tb.row("vigil gRPC unary", 4402.4, 14.834, 3.4216)
	tb.row("redsync (in-process)", 1286, 159.2, 1)
	var out bytes.Buffer
	rep.writeTable(&out)
	for _, want := range []string{"Contended: one resource", "| case | pairs/s | p99 | × redislock |", "| vigil gRPC unary | 4402 | 14.83ms | 3.42 |", "| redsync (in-process) | 1286 | 159ms | 1.00 |"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, out.String())
		}
	}
	if strings.Contains(out.String(), "measurement") {
		t.Errorf("report without results prints the results' heading:\n%s", out.String())
	}
	raw, err := json.Marshal(rep)
	if err != nil {
		t.Fatalf("json.Marshal: %v", err)
	}
	var back benchReport
	if err := json.Unmarshal(raw, &back); err != nil || len(back.Tables) != 1 || len(back.Tables[0].Rows) != 2 || back.Tables[0].Rows[0].Values[1] != 14.834 {
		t.Fatalf("JSON round trip = %+v, %v; want the table back", back, err)
	}
}

func TestBenchRedactURL(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"redis://127.0.0.1:6379/0":                "redis://127.0.0.1:6379/0",
		"redis://:secret@127.0.0.1:6379/0":        "redis://***@127.0.0.1:6379/0",
		"rediss://user:secret@redis.example:6380": "rediss://***@redis.example:6380",
	} {
		if got := benchRedactURL(in); got != want {
			t.Errorf("benchRedactURL(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestMain(m *testing.M) { redistest.Main(m) }

// runJSON runs a benchmark against the test Redis and returns its results by key.
func runJSON(t *testing.T, name string, args ...string) map[string]float64 {
	t.Helper()
	var out bytes.Buffer
	args = append(args, "--json", "--redis-url", redistest.URL(t))
	if err := runHarness(context.Background(), name, benchmarks[name], args, &out); err != nil {
		t.Fatalf("vigilbench %s %v: %v", name, args, err)
	}
	var rep benchReport
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		t.Fatalf("vigilbench %s printed no JSON report: %v\n%s", name, err, out.String())
	}
	got := map[string]float64{}
	for _, r := range rep.Results {
		got[r.Key] = r.Value
	}
	for _, tb := range rep.Tables {
		for _, row := range tb.Rows {
			for i, v := range row.Values {
				got[tb.Key+"/"+row.Name+"/"+tb.Columns[i].Name] = v
			}
		}
	}
	return got
}

// TestBenchmarksRunOnTheRealStack runs each benchmark small, on a real Redis: the bare queue
// drain and the service drain finish (each verifies every alarm handled once and every hold
// expired once, with its reservation-alarm line), and the creates run over gRPC and REST; every
// lock client completes pairs without an error in every workload; occupancy changes reach the
// lobby's list and the lobby is listed over gRPC and HTTP. Nothing here judges speed.
func TestBenchmarksRunOnTheRealStack(t *testing.T) {
	t.Parallel()
	t.Run("alarms", func(t *testing.T) {
		t.Parallel()
		got := runJSON(t, "alarms", "--count", "500", "--rate", "0", "--ceiling-requests", "0")
		if got["drain_throughput"] <= 0 {
			t.Fatalf("alarms results = %v, want a drain throughput", got)
		}
	})
	t.Run("reservations", func(t *testing.T) {
		t.Parallel()
		got := runJSON(t, "reservations", "--count", "300", "--duration", "300ms", "--concurrency", "4", "--ceiling-requests", "0")
		for _, k := range []string{"creates_grpc", "creates_rest", "creates_rest_vs_grpc", "creates_rest_nethttp", "creates_rest_nethttp_vs_grpc", "queue_drain_throughput", "drain_throughput", "drain_vs_queue"} {
			if got[k] <= 0 {
				t.Errorf("reservations result %s = %v, want it measured (%v)", k, got[k], got)
			}
		}
	})
	t.Run("locks", func(t *testing.T) {
		t.Parallel()
		got := runJSON(t, "locks", "--clients", "4", "--duration", "150ms", "--rounds", "1", "--warmup", "0")
		for _, w := range []string{"uncontended_1", "uncontended", "contended"} {
			for _, c := range locksClients {
				if got[w+"/"+c+"/pairs/s"] <= 0 || got[w+"/"+c+"/errors"] != 0 {
					t.Errorf("locks %s %s: pairs/s %v, errors %v; want pairs and no error", w, c, got[w+"/"+c+"/pairs/s"], got[w+"/"+c+"/errors"])
				}
			}
			if r := got[w+"/bsm/redislock (in-process)/× redislock"]; r != 1 {
				t.Errorf("locks %s: redislock's ratio to itself = %v, want 1", w, r)
			}
			for _, k := range []string{w + "_rest_vs_grpc", w + "_rest_nethttp_vs_grpc", w + "_session_vs_redislock", w + "_session_vs_grpc"} {
				if got[k] <= 0 {
					t.Errorf("locks %s = %v, want the ratio measured", k, got[k])
				}
			}
		}
	})
	t.Run("locks -workloads", func(t *testing.T) {
		t.Parallel()
		got := runJSON(t, "locks", "--workloads", "contended", "--only", "session", "--clients", "4", "--duration", "150ms", "--rounds", "1", "--warmup", "0")
		if got["contended/vigil session/pairs/s"] <= 0 || got["contended/vigil session/errors"] != 0 {
			t.Errorf("locks --workloads contended: session pairs/s %v, errors %v; want pairs and no error", got["contended/vigil session/pairs/s"], got["contended/vigil session/errors"])
		}
		for k := range got {
			if strings.HasPrefix(k, "uncontended") {
				t.Errorf("locks --workloads contended measured %s", k)
			}
		}
		err := runHarness(context.Background(), "locks", benchmarks["locks"], []string{"--workloads", "contended,most", "--redis-url", redistest.URL(t)}, io.Discard)
		if !errors.Is(err, errUsage) || !strings.Contains(err.Error(), `"most"`) {
			t.Errorf("locks --workloads contended,most: err = %v, want a usage error naming \"most\"", err)
		}
	})
	t.Run("durability", func(t *testing.T) {
		t.Parallel()
		// Its own primary and two replicas (redis-server children), so no --redis-url; no etcd
		// (CI has none installed).
		var out bytes.Buffer
		args := []string{"--clients", "2", "--duration", "150ms", "--rounds", "1", "--etcd", "none", "--redis-timeout", "5s", "--json"}
		if err := runHarness(context.Background(), "durability", benchmarks["durability"], args, &out); err != nil {
			t.Fatalf("vigilbench durability %v: %v", args, err)
		}
		var rep benchReport
		if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
			t.Fatalf("vigilbench durability printed no JSON report: %v\n%s", err, out.String())
		}
		if len(rep.Tables) != 4 {
			t.Fatalf("durability tables = %d, want 4 (creates, two lock workloads, posts): %s", len(rep.Tables), out.String())
		}
		for _, tb := range rep.Tables {
			if len(tb.Rows) != 3 {
				t.Errorf("durability %s: %d rows, want async, replica, fsync", tb.Key, len(tb.Rows))
			}
			for _, row := range tb.Rows {
				if row.Values[0] <= 0 || row.Values[len(row.Values)-1] != 0 {
					t.Errorf("durability %s %s: ops/s %v, errors %v; want operations and no error", tb.Key, row.Name, row.Values[0], row.Values[len(row.Values)-1])
				}
			}
		}
		err := runHarness(context.Background(), "durability", benchmarks["durability"], []string{"--redis-url", "redis://127.0.0.1:1/0"}, io.Discard)
		if !errors.Is(err, errUsage) || !strings.Contains(err.Error(), "--redis-url") {
			t.Errorf("durability --redis-url: err = %v, want a usage error naming --redis-url", err)
		}
	})
	t.Run("lobby", func(t *testing.T) {
		t.Parallel()
		got := runJSON(t, "lobby", "--churn", "12", "--parallel", "2", "--rooms", "40", "--lists", "3", "--touch-rate", "50")
		for k, want := range map[string]float64{
			"occupancy/1 room, sequential/n":                                                                12 + 7, // 12 joins, 7 leaves (5 open at most)
			"occupancy/2 rooms at once, as fast as they go/n":                                               2 * (12 + 7),
			"occupancy/2 rooms at once, paced at 10% of that/n":                                             2 * (12 + 7),
			"occupancy/2 rooms at once, paced at 50% of that/n":                                             2 * (12 + 7),
			"occupancy/2 rooms at once, paced at 50% of that, joins: dial → socket answered/n":              2 * 12,
			"listing/ListRooms page of 50 over gRPC, unchanged lobby/n":                                     3,
			"listing/GET /lobby/rooms?limit=50, first page, unchanged lobby/n":                              3,
			"listing/GET /lobby/rooms?limit=50, page at room 20, unchanged lobby/n":                         3,
			"listing/GET /lobby/rooms?q=zzz, search matching nothing (scans every room), unchanged lobby/n": 3,
			"listing/ListRooms page of 50 over gRPC, 50 room changes/s/n":                                   3,
			"listing/GET /lobby/rooms?limit=50, first page, 50 room changes/s/n":                            3,
			"listing/GET /lobby/rooms?limit=50, first page, 50 room changes/s/failed":                       0,
			"listing_rooms": 40 + 1 + 3*2, // the churned rooms stay listed
		} {
			v, ok := got[k]
			if !ok || v != want {
				t.Errorf("lobby %s = %v (reported: %v), want %v (%v)", k, v, ok, want, got)
			}
		}
		// The change ceiling and a page's size are measured, whatever their values.
		for _, k := range []string{"lobby_ceiling", "lobby_ceiling_ratio", "page_json_kib"} {
			if got[k] <= 0 {
				t.Errorf("lobby %s = %v, want a measured figure above 0", k, got[k])
			}
		}
	})
	t.Run("gateway-heap", func(t *testing.T) {
		t.Parallel()
		got := runJSON(t, "gateway-heap", "--duration", "2s", "--warm", "0s", "--window", "1s", "--concurrency", "4", "--waiters", "1")
		const row = "heap/this checkout/"
		if got[row+"calls"] <= 0 || got[row+"failed"] != 0 || got[row+"GCs"] <= 0 {
			t.Errorf("gateway-heap: calls %v, failed %v, GCs %v; want calls, none failed, collections read (%v)", got[row+"calls"], got[row+"failed"], got[row+"GCs"], got)
		}
	})
	t.Run("reattach", func(t *testing.T) {
		t.Parallel()
		got := runJSON(t, "reattach", "--rooms", "5", "--restarts", "1", "--settle", "0s")
		const row = "reattach/this checkout, restart 1/"
		if got[row+"attached"] != 5 || got[row+"restart"] <= 0 || got[row+"max"] < got[row+"p50"] {
			t.Errorf("reattach: attached %v, restart %v, p50 %v, max %v; want 5 rooms attached again after a restart (%v)",
				got[row+"attached"], got[row+"restart"], got[row+"p50"], got[row+"max"], got)
		}
	})
	t.Run("lobby -processes", func(t *testing.T) {
		t.Parallel()
		got := runJSON(t, "lobby", "--processes", "--churn", "12", "--parallel", "2", "--parallel-loads", "", "--rooms", "0")
		for k, want := range map[string]float64{
			"occupancy/1 room, sequential/n":                  12 + 7,
			"occupancy/2 rooms at once, as fast as they go/n": 2 * (12 + 7),
		} {
			if v, ok := got[k]; !ok || v != want {
				t.Errorf("lobby -processes %s = %v (reported: %v), want %v (%v)", k, v, ok, want, got)
			}
		}
		// The services' CPU is their processes': this one's alone would be far below a
		// change's, and the children's ticks are 10 ms, so only that some is counted is checked.
		if cpu := got["occupancy/2 rooms at once, as fast as they go/CPU/op"]; cpu <= 0 {
			t.Errorf("lobby -processes CPU/op = %v, want the stack's processes counted", cpu)
		}
	})
}

// TestProcessThatExitsAtStart: a child that exits before it listens is an error naming it, and
// stopping the harness afterwards returns (it once waited for an exit already taken).
func TestProcessThatExitsAtStart(t *testing.T) {
	t.Parallel()
	var h Harness
	err := h.Process(context.Background(), "false", "/bin/false", "127.0.0.1:1")
	if err == nil || !strings.Contains(err.Error(), "false exited at start") {
		t.Fatalf("Process(/bin/false) = %v, want an error saying it exited at start", err)
	}
	stopped := make(chan struct{})
	go func() {
		h.stack.stop()
		close(stopped)
	}()
	wait.Until(t, "the harness stopped", func() bool {
		select {
		case <-stopped:
			return true
		default:
			return false
		}
	})
}

func TestProcCPUReadsThisProcess(t *testing.T) {
	t.Parallel()
	// Burn at least two clock ticks so that /proc shows some CPU time.
	for start := time.Now(); time.Since(start) < 50*time.Millisecond; {
	}
	if cpu := procCPU(os.Getpid()); cpu <= 0 {
		t.Fatalf("procCPU(self) = %v, want the CPU time this test burnt", cpu)
	}
	if cpu := procCPU(-1); cpu != 0 {
		t.Fatalf("procCPU(-1) = %v, want 0 for a process that is not there", cpu)
	}
}
