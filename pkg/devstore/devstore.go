// Package devstore provides the zero-setup development store: the Redis named by a URL if one
// is given; otherwise a local redis-server started as a child process with AOF in a data
// directory, if one is installed; otherwise an embedded in-process Redis (miniredis) kept in
// the same data directory (embedded.go: written every second when it changed and on Close,
// loaded at start). The embedded store is for trying Vigil out, never for proving Redis
// behaviour: tests run against real Redis.
package devstore

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// Kind says which store Open chose.
type Kind string

// The kinds of store.
const (
	External Kind = "external"
	Child    Kind = "redis-server"
	Embedded Kind = "embedded"
)

// Store is a running development store.
type Store struct {
	// URL to connect to.
	URL string
	// Kind of store.
	Kind Kind
	// Detail says where it lives (the data directory, or the external URL's host) and, for the
	// stores Open starts, what a crash can lose.
	Detail string
	stop   func() error
}

// Close stops a store that Open started; the embedded store writes its data a last time.
func (s *Store) Close() error {
	if s.stop != nil {
		return s.stop()
	}
	return nil
}

// Options say which store Open picks. Every zero value has the default given in its comment.
type Options struct {
	// URL of a Redis to use as is. Default "": Open starts one.
	URL string
	// DataDir holds the started store's data. Default ".data".
	DataDir string
	// Kind forces a kind of started store (Child or Embedded). Default "": a redis-server child
	// when one is installed, else the embedded store.
	Kind Kind
	// Logger for the embedded store's save errors. Default slog.Default().
	Logger *slog.Logger
}

// Open returns the store to use: o.URL when given; else a redis-server child with its AOF in
// o.DataDir; else the embedded store, kept in o.DataDir/embedded.json.
func Open(ctx context.Context, o Options) (*Store, error) {
	if o.URL != "" {
		return &Store{URL: o.URL, Kind: External, Detail: o.URL}, nil
	}
	if o.DataDir == "" {
		o.DataDir = ".data"
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	switch o.Kind {
	case "", Child:
		bin, err := exec.LookPath("redis-server")
		if err == nil {
			return startChild(ctx, bin, o.DataDir)
		}
		if o.Kind == Child {
			return nil, fmt.Errorf("the redis-server store needs redis-server installed: %w", err)
		}
	case Embedded:
	default:
		return nil, fmt.Errorf("store kind %q: want %s or %s", o.Kind, Child, Embedded)
	}
	e, err := openEmbedded(o.DataDir, o.Logger)
	if err != nil {
		return nil, err
	}
	return &Store{URL: "redis://" + e.m.Addr() + "/0", Kind: Embedded, stop: e.close,
		Detail: fmt.Sprintf("%s, saved every %v and on exit; a crash loses at most the last %v of writes", e.path, SaveEvery, SaveEvery)}, nil
}

func startChild(ctx context.Context, bin, dataDir string) (*Store, error) {
	dir, err := filepath.Abs(dataDir)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("data directory: %w", err)
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, "--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--dir", dir,
		"--appendonly", "yes", "--appendfsync", "everysec", "--save", "", "--daemonize", "no",
		"--logfile", filepath.Join(dir, "redis.log"))
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start redis-server: %w", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	stop := func() error {
		_ = cmd.Process.Signal(os.Interrupt) // redis-server writes its AOF and exits
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
		}
		return nil
	}
	url := fmt.Sprintf("redis://127.0.0.1:%d/0", port)
	c := redis.NewClient(&redis.Options{Addr: fmt.Sprintf("127.0.0.1:%d", port)})
	defer c.Close()
	deadline := time.Now().Add(15 * time.Second)
	for {
		if err := c.Ping(ctx).Err(); err == nil {
			return &Store{URL: url, Kind: Child, Detail: dir + ", AOF fsynced every second; a crash loses at most the last second of writes", stop: stop}, nil
		}
		select {
		case err := <-exited:
			return nil, fmt.Errorf("redis-server exited: %v (see %s)", err, filepath.Join(dir, "redis.log"))
		case <-ctx.Done():
			_ = stop()
			return nil, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			_ = stop()
			return nil, errors.New("redis-server did not answer within 15s")
		}
	}
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
