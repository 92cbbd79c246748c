package config

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// TestBadEnvironmentStopsTheStart: values that do not parse are errors naming the variable and
// what it wants, never the default in disguise; a flag on the command line overrides a bad
// variable; good values pass.
func TestBadEnvironmentStopsTheStart(t *testing.T) {
	t.Setenv("VIGIL_SHARDS", "3x")
	t.Setenv("VIGIL_REPLAY", "yes please")
	t.Setenv("VIGIL_DRAIN_TIMEOUT", "10")
	t.Setenv("VIGIL_LOG_LEVEL", "verbose")
	fs := flag.NewFlagSet("svc", flag.ContinueOnError)
	Service(fs, ":7001", ":9001")
	shards := Int(fs, "shards", "VIGIL_SHARDS", 16, "shards")
	Bool(fs, "replay", "VIGIL_REPLAY", false, "replay")
	Duration(fs, "drain-timeout", "VIGIL_DRAIN_TIMEOUT", time.Second, "drain")
	if err := fs.Parse(nil); err != nil {
		t.Fatal(err)
	}
	err := Check(fs)
	for _, want := range []string{
		`VIGIL_SHARDS="3x" is not a whole number (set it right, or give -shards)`,
		`VIGIL_REPLAY="yes please" is not true or false`,
		`VIGIL_DRAIN_TIMEOUT="10" is not a duration such as 500ms or 10s`,
		`log level "verbose": want debug, info, warn or error`,
	} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Check = %v; want it to say %q", err, want)
		}
	}
	if *shards != 16 {
		t.Errorf("-shards = %d with VIGIL_SHARDS=3x; the default stands only because Check refuses it", *shards)
	}

	// The same variables, overridden on the command line: nothing to refuse.
	fs = flag.NewFlagSet("svc", flag.ContinueOnError)
	Service(fs, ":7001", ":9001")
	shards = Int(fs, "shards", "VIGIL_SHARDS", 16, "shards")
	Bool(fs, "replay", "VIGIL_REPLAY", false, "replay")
	Duration(fs, "drain-timeout", "VIGIL_DRAIN_TIMEOUT", time.Second, "drain")
	if err := fs.Parse([]string{"-shards=3", "-replay=true", "-drain-timeout=5s", "-log-level=debug"}); err != nil {
		t.Fatal(err)
	}
	if err := Check(fs); err != nil || *shards != 3 {
		t.Errorf("Check with every bad variable overridden by a flag = %v, shards %d; want nil, 3", err, *shards)
	}

	// A bad flag is refused by the flag set itself.
	fs = flag.NewFlagSet("svc", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	Int(fs, "workers", "VIGIL_WORKERS_UNSET", 4, "workers")
	if err := fs.Parse([]string{"-workers=4x"}); err == nil || !strings.Contains(err.Error(), `invalid value "4x" for flag -workers`) {
		t.Errorf("Parse(-workers=4x) = %v; want the flag package's refusal", err)
	}
}

// TestMainRefusesABadVariable runs a service-like main in a child process with VIGIL_SHARDS=3x:
// it exits 2 with the sentence and never runs.
func TestMainRefusesABadVariable(t *testing.T) {
	if os.Getenv("CONFIG_TEST_MAIN") == "1" {
		fs := flag.NewFlagSet("locks", flag.ExitOnError)
		Service(fs, ":7002", ":9002")
		Int(fs, "shards", "VIGIL_SHARDS", 16, "shards")
		_ = fs.Parse(nil)
		Main("locks", func(context.Context) error { fmt.Println("ran"); return nil })
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestMainRefusesABadVariable$")
	cmd.Env = append(os.Environ(), "CONFIG_TEST_MAIN=1", "VIGIL_SHARDS=3x")
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 2 {
		t.Fatalf("main with VIGIL_SHARDS=3x = %v, want exit code 2; output:\n%s", err, out)
	}
	if !strings.Contains(string(out), `locks: VIGIL_SHARDS="3x" is not a whole number`) || strings.Contains(string(out), "ran") {
		t.Fatalf("main with VIGIL_SHARDS=3x printed:\n%s\nwant the sentence, and no run", out)
	}
}

// TestRedisSettings: a durability that is not one of the three, and Sentinels without the name
// of their primary, stop the start with a sentence naming the fix; the flags carry durability
// and Sentinels into redisx.Config.
func TestRedisSettings(t *testing.T) {
	t.Setenv("VIGIL_REDIS_DURABILITY", "strong")
	t.Setenv("VIGIL_REDIS_SENTINELS", "10.0.0.1:26379, 10.0.0.2:26379")
	fs := flag.NewFlagSet("svc", flag.ContinueOnError)
	f := Service(fs, ":7001", ":9001")
	if err := fs.Parse(nil); err != nil {
		t.Fatal(err)
	}
	err := Check(fs)
	for _, want := range []string{
		`redis durability "strong": want async`, "replica (", "fsync (", "VIGIL_REDIS_DURABILITY",
		"redis sentinels 10.0.0.1:26379,10.0.0.2:26379 are given without the name of the primary they watch: set VIGIL_REDIS_MASTER",
	} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Check = %v; want it to say %q", err, want)
		}
	}

	fs = flag.NewFlagSet("svc", flag.ContinueOnError)
	f = Service(fs, ":7001", ":9001")
	if err := fs.Parse([]string{"-redis-durability", "replica", "-redis-master", "vigil-locks"}); err != nil {
		t.Fatal(err)
	}
	if err := Check(fs); err != nil {
		t.Fatalf("Check with good values = %v", err)
	}
	c := f.Redis()
	if c.Durability != "replica" || c.MasterName != "vigil-locks" || len(c.SentinelAddrs) != 2 || c.URL != "" {
		t.Fatalf("Redis() = %+v; want replica durability and the two Sentinels of vigil-locks", c)
	}
}
