// Package devstore provides the zero-setup development store: the Redis named by a URL if one
// is given; otherwise a local redis-server started as a child process with AOF in a data
// directory, if one is installed; otherwise an embedded in-process Redis (miniredis), which
// keeps nothing across restarts. The embedded store is for trying Vigil out, never for proving
// Redis behaviour: tests run against real Redis.
package devstore

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"time"

	"github.com/alicebob/miniredis/v2"
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
	// Detail says where it lives (the data directory, or the external URL's host).
	Detail string
	stop   func()
}

// Close stops a store that Open started.
func (s *Store) Close() {
	if s.stop != nil {
		s.stop()
	}
}

// Open returns the store to use: url when given; else a redis-server child with its AOF in
// dataDir; else an embedded Redis.
func Open(ctx context.Context, url, dataDir string) (*Store, error) {
	if url != "" {
		return &Store{URL: url, Kind: External, Detail: url}, nil
	}
	if bin, err := exec.LookPath("redis-server"); err == nil {
		return startChild(ctx, bin, dataDir)
	}
	m, err := miniredis.Run()
	if err != nil {
		return nil, fmt.Errorf("start embedded Redis: %w", err)
	}
	return &Store{URL: "redis://" + m.Addr() + "/0", Kind: Embedded, Detail: "in memory; nothing persists", stop: m.Close}, nil
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
	stop := func() {
		_ = cmd.Process.Signal(os.Interrupt) // redis-server writes its AOF and exits
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
		}
	}
	url := fmt.Sprintf("redis://127.0.0.1:%d/0", port)
	c := redis.NewClient(&redis.Options{Addr: fmt.Sprintf("127.0.0.1:%d", port)})
	defer c.Close()
	deadline := time.Now().Add(15 * time.Second)
	for {
		if err := c.Ping(ctx).Err(); err == nil {
			return &Store{URL: url, Kind: Child, Detail: dir, stop: stop}, nil
		}
		select {
		case err := <-exited:
			return nil, fmt.Errorf("redis-server exited: %v (see %s)", err, filepath.Join(dir, "redis.log"))
		case <-ctx.Done():
			stop()
			return nil, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			stop()
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
