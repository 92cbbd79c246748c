// Package config reads service settings from flags, falling back to environment variables, then
// to documented defaults. A flag given on the command line wins over the environment. It is for
// mains only: libraries take their configuration from Options.
//
// A value that does not parse stops the start with a sentence: a bad flag when the flag set is
// parsed (the flag package), a bad environment variable when Check (or Main) runs, unless the
// flag was given on the command line and so overrides it. VIGIL_SHARDS=3x is an error, never 16.
package config

import (
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/vigil-dev/vigil/pkg/tracing"
)

// problems are what defining flags found wrong, per flag set, reported by Check.
var problems struct {
	mu   sync.Mutex
	sets []*flag.FlagSet
	env  map[*flag.FlagSet][]envProblem
	// checks validate flag values after parsing (a log level, say).
	checks map[*flag.FlagSet][]func() error
}

// envProblem is an environment variable whose value does not parse as its flag's type.
type envProblem struct {
	flag, key, value, want string
}

func addSet(fs *flag.FlagSet) {
	for _, s := range problems.sets {
		if s == fs {
			return
		}
	}
	problems.sets = append(problems.sets, fs)
}

func badEnv(fs *flag.FlagSet, name, key, value, want string) {
	problems.mu.Lock()
	defer problems.mu.Unlock()
	addSet(fs)
	if problems.env == nil {
		problems.env = map[*flag.FlagSet][]envProblem{}
	}
	problems.env[fs] = append(problems.env[fs], envProblem{name, key, value, want})
}

// Validate adds a check of fs's values that Check runs once fs is parsed.
func Validate(fs *flag.FlagSet, check func() error) {
	problems.mu.Lock()
	defer problems.mu.Unlock()
	addSet(fs)
	if problems.checks == nil {
		problems.checks = map[*flag.FlagSet][]func() error{}
	}
	problems.checks[fs] = append(problems.checks[fs], check)
}

// Check reports, in sentences, every value of fs that does not parse: each environment variable
// of a flag not given on the command line, and each Validate check. Call it after fs.Parse.
func Check(fs *flag.FlagSet) error {
	problems.mu.Lock()
	env, checks := problems.env[fs], problems.checks[fs]
	problems.mu.Unlock()
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	var errs []error
	for _, p := range env {
		if !set[p.flag] {
			errs = append(errs, fmt.Errorf("%s=%q is not %s (set it right, or give -%s)", p.key, p.value, p.want, p.flag))
		}
	}
	for _, c := range checks {
		if err := c(); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// checkAll is Check over every parsed flag set that defined flags through this package.
func checkAll() error {
	problems.mu.Lock()
	sets := append([]*flag.FlagSet(nil), problems.sets...)
	problems.mu.Unlock()
	var errs []error
	for _, fs := range sets {
		if fs.Parsed() {
			errs = append(errs, Check(fs))
		}
	}
	return errors.Join(errs...)
}

// Env returns the environment variable key, or def when it is unset or empty.
func Env(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}

// String defines a string flag whose default comes from env var key, else def.
func String(fs *flag.FlagSet, name, key, def, usage string) *string {
	return fs.String(name, Env(key, def), fmt.Sprintf("%s (env %s)", usage, key))
}

// Int defines an int flag whose default comes from env var key, else def. An env value that is
// not a whole number is reported by Check.
func Int(fs *flag.FlagSet, name, key string, def int, usage string) *int {
	v := envDefault(fs, name, key, def, strconv.Atoi, "a whole number")
	return fs.Int(name, v, fmt.Sprintf("%s (env %s)", usage, key))
}

// Bool defines a bool flag whose default comes from env var key, else def. An env value that is
// not true or false (or 1, 0, t, f) is reported by Check.
func Bool(fs *flag.FlagSet, name, key string, def bool, usage string) *bool {
	v := envDefault(fs, name, key, def, strconv.ParseBool, "true or false")
	return fs.Bool(name, v, fmt.Sprintf("%s (env %s)", usage, key))
}

// Duration defines a duration flag whose default comes from env var key, else def. An env value
// that is not a Go duration is reported by Check.
func Duration(fs *flag.FlagSet, name, key string, def time.Duration, usage string) *time.Duration {
	v := envDefault(fs, name, key, def, time.ParseDuration, "a duration such as 500ms or 10s")
	return fs.Duration(name, v, fmt.Sprintf("%s (env %s)", usage, key))
}

// envDefault is flag name's default: env var key read with parse when set, else def. A value
// parse refuses is recorded for Check, saying the flag wants want, and def stays.
func envDefault[T any](fs *flag.FlagSet, name, key string, def T, parse func(string) (T, error), want string) T {
	s := os.Getenv(key)
	if s == "" {
		return def
	}
	v, err := parse(strings.TrimSpace(s))
	if err != nil {
		badEnv(fs, name, key, s, want)
		return def
	}
	return v
}

// LogSettings checks a log format and level as Logger reads them.
func LogSettings(format, level string) error {
	var errs []error
	if format != "json" && format != "text" {
		errs = append(errs, fmt.Errorf("log format %q: want json or text", format))
	}
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(strings.ToUpper(level))); err != nil {
		errs = append(errs, fmt.Errorf("log level %q: want debug, info, warn or error", level))
	}
	return errors.Join(errs...)
}

// Logger builds the process logger: JSON lines on stderr, or text when format is "text".
// Level is one of debug, info, warn, error (default info).
func Logger(format, level string) *slog.Logger {
	var lvl slog.Level
	_ = lvl.UnmarshalText([]byte(strings.ToUpper(level)))
	opts := &slog.HandlerOptions{Level: lvl}
	// Lines logged with a traced context carry its traceId and spanId (see pkg/tracing).
	if format == "text" {
		return slog.New(tracing.LogHandler(slog.NewTextHandler(os.Stderr, opts)))
	}
	return slog.New(tracing.LogHandler(slog.NewJSONHandler(os.Stderr, opts)))
}
