// Command vigilbench measures Vigil: the real alarm queue, the real services behind the real
// gateway, and the Redis they run on, with one way to start Redis and the stack and one report
// (a table with ratios, or JSON). It is its own module, so the operator CLI (cmd/vigil) and
// the services carry no benchmark code.
//
//	go run ./cmd/vigilbench <benchmark> [flags]
//
// Adding a benchmark: write a
// func(ctx, *Harness, *flag.FlagSet, []string) error in its own file and add one line to
// benchmarks below. The Harness has the rest: h.Redis(ctx) (a throwaway redis-server or
// --redis-url, with its CPU time), h.Serve(ctx, name, svc) for any service built by its
// service.New, h.Gateway(ctx, backends), h.Prefix for keys, withCeilings for the raw EVALSHA
// reference, and h.Report (add, addLatencies, ratio, note, and table for a row per case),
// printed as tables or JSON.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"os"
	"os/signal"
	"slices"
	"syscall"
)

// A Benchmark is one vigilbench subcommand.
type Benchmark struct {
	// About is the one-line description the usage lists.
	About string
	// Run parses the benchmark's own flags (the harness's common ones are already on fs) and
	// measures, adding results to h.Report.
	Run func(ctx context.Context, h *Harness, fs *flag.FlagSet, args []string) error
}

// benchmarks are the subcommands. chat and rooms measure a chat-server running in another
// process (so its memory is the server's alone).
var benchmarks = map[string]Benchmark{
	"alarms":       {"pkg/alarm alone: drain 100,000 due alarms, steady 1,000 alarms/s, beside the raw EVALSHA ceiling", benchAlarms},
	"reservations": {"the reservations service + gateway: creates/s over gRPC and REST; 100,000 holds drained through the service, the bare queue and the raw EVALSHA ceiling in one run", benchReservations},
	"durability":   {"what durability costs: reservations creates, lock pairs and chat posts with async, replica and fsync in one run on a primary with two replicas (redis-server children), beside etcd's concurrency.Mutex", benchDurability},
	"reattach":     {"a Room replica restarted under a gateway of 1,000 practice rooms: the re-attach burst's spread, the time until each room is attached again and the Room process's CPU peak, beside another checkout's gateway (-before)", benchReattach},
	"redis":        {"the raw Redis ceiling alone: redis-benchmark EVALSHA compare-and-set, unpipelined and pipeline 16", benchRedisCeiling},
	"locks":        {"the lock service + gateway: acquire+release pairs over gRPC, session and REST, uncontended and contended, beside redsync, bsm/redislock and a raw EVALSHA pair", benchLocks},
	"chat-server":  {"chat, the Lobby, a Room replica + gateway on fixed addresses, with /mem for chat and rooms; runs until interrupted (-run services|gateway splits it in two)", benchChatServer},
	"chat":         {"chat clients against a running chat-server: memory per idle socket, deliveries/s and latency in one room of 1,000 sockets per offered rate", benchChat},
	"rooms":        {"a practice room against a running chat-server: a leader and 1,000 viewers, memory per idle room socket, deliveries/s and latency per leader rate", benchRooms},
	"gateway-heap": {"the gateway (a process, GODEBUG=gctrace=1) under steady REST load through one locks replica: its live heap after minutes, beside another checkout's gateway (-before)", benchGatewayHeap},
	"lobby":        {"the Lobby, a Room replica + gateway: occupancy change to the lobby's list (sockets churning), listing 10,000 rooms over gRPC and HTTP", benchLobby},
}

const usage = `Usage: vigilbench <benchmark> [flags]

Measures a part of Vigil and prints a results table (or JSON with --json); progress goes to
stderr. Without --redis-url each run starts a throwaway redis-server on a free port.
VIGIL_BENCH_CPUPROFILE=file writes a Go CPU profile of the whole run, VIGIL_BENCH_TRACE=file
an execution trace (go tool trace).

Benchmarks:
`

// errUsage marks a command line the user should correct (exit status 2).
var errUsage = errors.New("usage")

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	err := run(ctx, os.Args[1:])
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
	case errors.Is(err, errUsage):
		fmt.Fprintln(os.Stderr, "vigilbench:", err)
		os.Exit(2)
	default:
		fmt.Fprintln(os.Stderr, "vigilbench:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string) error {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		printUsage(os.Stderr)
		if len(args) == 0 {
			return fmt.Errorf("%w: name a benchmark", errUsage)
		}
		return nil
	}
	b, ok := benchmarks[args[0]]
	if !ok {
		printUsage(os.Stderr)
		return fmt.Errorf("%w: unknown benchmark %q", errUsage, args[0])
	}
	return runHarness(ctx, args[0], b, args[1:], os.Stdout)
}

func printUsage(w io.Writer) {
	fmt.Fprint(w, usage)
	for _, n := range slices.Sorted(maps.Keys(benchmarks)) {
		fmt.Fprintf(w, "  %-13s %s\n", n, benchmarks[n].About)
	}
	fmt.Fprintln(w, "\nRun \"vigilbench <benchmark> -h\" for its flags.")
}
