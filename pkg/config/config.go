// Package config reads service settings from flags, falling back to environment variables, then
// to documented defaults. A flag given on the command line wins over the environment.
package config

import (
	"flag"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/vigil-dev/vigil/pkg/tracing"
)

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

// Int defines an int flag whose default comes from env var key, else def.
func Int(fs *flag.FlagSet, name, key string, def int, usage string) *int {
	v := def
	if s := os.Getenv(key); s != "" {
		if n, err := strconv.Atoi(s); err == nil {
			v = n
		}
	}
	return fs.Int(name, v, fmt.Sprintf("%s (env %s)", usage, key))
}

// Bool defines a bool flag whose default comes from env var key, else def.
func Bool(fs *flag.FlagSet, name, key string, def bool, usage string) *bool {
	v := def
	if s := os.Getenv(key); s != "" {
		if b, err := strconv.ParseBool(s); err == nil {
			v = b
		}
	}
	return fs.Bool(name, v, fmt.Sprintf("%s (env %s)", usage, key))
}

// Duration defines a duration flag whose default comes from env var key, else def.
func Duration(fs *flag.FlagSet, name, key string, def time.Duration, usage string) *time.Duration {
	v := def
	if s := os.Getenv(key); s != "" {
		if d, err := time.ParseDuration(s); err == nil {
			v = d
		}
	}
	return fs.Duration(name, v, fmt.Sprintf("%s (env %s)", usage, key))
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
