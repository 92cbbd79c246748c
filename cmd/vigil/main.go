// Command vigil is Vigil's one binary for people: `vigil dev` runs every service and the
// gateway in one process; the other subcommands operate a running system. Benchmarks live in
// cmd/vigilbench.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

const usage = `vigil: run and operate Vigil

Usage:
  vigil dev [flags]      run every service and the gateway in one process
  vigil alarms list|dead|replay|discard|get
                         see what is scheduled, late or dead in each domain; act on dead letters
  vigil reservations get|create <id>
  vigil locks get|acquire|release <resource>
  vigil rooms list

Run "vigil <command> -h" for a command's flags. Operator commands print tables, or JSON with
--json, and exit 0 done, 1 failed, 2 bad usage, 3 not found, 4 refused or check failed,
5 service unavailable.
`

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(run(ctx, os.Args[1:]))
}

// run dispatches a subcommand and turns its error into an exit code: 0 done, 1 failed,
// 2 bad usage.
func run(ctx context.Context, args []string) int {
	if len(args) == 0 {
		fmt.Fprint(os.Stderr, usage)
		return 2
	}
	var err error
	switch args[0] {
	case "dev":
		err = runDev(ctx, args[1:])
	case "alarms", "reservations", "locks", "rooms":
		err = runOps(ctx, args[0], args[1:], os.Stdout, os.Stderr)
	case "-h", "--help", "help":
		fmt.Print(usage)
		return 0
	default:
		fmt.Fprintf(os.Stderr, "vigil: unknown command %q\n\n%s", args[0], usage)
		return 2
	}
	if code, ok := opsExitCode(err); ok {
		fmt.Fprintln(os.Stderr, "vigil:", err)
		return code
	}
	switch {
	case err == nil:
		return 0
	case errors.Is(err, flag.ErrHelp):
		return 0
	case errors.Is(err, errUsage):
		fmt.Fprintln(os.Stderr, "vigil:", err)
		return 2
	default:
		fmt.Fprintln(os.Stderr, "vigil:", err)
		return 1
	}
}

// errUsage marks a command line the user should correct.
var errUsage = errors.New("usage")
