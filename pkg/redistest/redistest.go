// Package redistest gives tests a real Redis: a container started through testcontainers-go,
// or an existing server named by VIGIL_TEST_REDIS_URL where Docker is not available. Tests
// share one server per test binary and isolate themselves by key prefix, so they run in
// parallel; tests that restart Redis start a container of their own.
package redistest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/testcontainers/testcontainers-go"

	"github.com/testcontainers/testcontainers-go/wait"
	"github.com/vigil-dev/vigil/pkg/redisx"
)

const (
	// EnvURL names an existing Redis to test against instead of starting a container.
	EnvURL = "VIGIL_TEST_REDIS_URL"
	// EnvImage names the Redis image to run. Default DefaultImage; CI here sets the image
	// built from Debian's redis-server by deploy/redis/build-image.sh.
	EnvImage = "VIGIL_REDIS_IMAGE"
	// DefaultImage is the official Redis image.
	DefaultImage = "redis:7.4"
)

var shared struct {
	once sync.Once
	url  string
	srv  *Server
	err  error
}

// TestRedisTimeout is the Redis call timeout Main gives every client a test binary opens
// (redisx.UnsetTimeout), unless VIGIL_REDIS_TIMEOUT says otherwise: tests check semantics on a
// machine shared with other builds, where one call may stall past redisx's 400 ms production
// default; service processes the tests start get it through VIGIL_REDIS_TIMEOUT. Tests that
// measure failing fast set redisx.Config.Timeout themselves.
const TestRedisTimeout = 5 * time.Second

// Main runs a package's tests, then stops the shared Redis. Call it from TestMain.
func Main(m *testing.M) {
	redisx.UnsetTimeout = TestRedisTimeout
	if d, err := time.ParseDuration(os.Getenv("VIGIL_REDIS_TIMEOUT")); err == nil && d > 0 {
		redisx.UnsetTimeout = d
	} else {
		// Service processes a test starts read their timeout from the environment (their flags).
		_ = os.Setenv("VIGIL_REDIS_TIMEOUT", TestRedisTimeout.String())
	}
	code := m.Run()
	if shared.srv != nil {
		shared.srv.terminate()
	}
	if sharedCluster.c != nil {
		sharedCluster.c.terminate()
	}
	os.Exit(code)
}

// URL is the URL of the shared Redis, started on first use.
func URL(t testing.TB) string {
	t.Helper()
	shared.once.Do(func() {
		if u := os.Getenv(EnvURL); u != "" {
			shared.url = u
			return
		}
		shared.srv, shared.err = start(context.Background())
		if shared.err == nil {
			shared.url, shared.err = shared.srv.url(context.Background())
		}
	})
	if shared.err != nil {
		t.Fatalf("start Redis (set %s to use an existing one): %v", EnvURL, shared.err)
	}
	return shared.url
}

// Client connects to the shared Redis and returns a key prefix unique to this test. The client
// is closed and the prefix's keys deleted when the test ends.
func Client(t testing.TB) (*redis.Client, string) {
	t.Helper()
	opt, err := redis.ParseURL(URL(t))
	if err != nil {
		t.Fatalf("parse Redis URL: %v", err)
	}
	c := redis.NewClient(opt)
	prefix := Prefix(t)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		iter := c.Scan(ctx, 0, prefix+"*", 1000).Iterator()
		for iter.Next(ctx) {
			c.Del(ctx, iter.Val())
		}
		_ = c.Close()
	})
	return c, prefix
}

var unsafeChars = regexp.MustCompile(`[^a-zA-Z0-9]+`)

// Prefix is a key prefix unique to this test: its name plus random bytes.
func Prefix(t testing.TB) string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	name := strings.ToLower(unsafeChars.ReplaceAllString(t.Name(), "-"))
	if len(name) > 40 {
		name = name[len(name)-40:]
	}
	return "t-" + name + "-" + hex.EncodeToString(b[:])
}

// Server is a Redis container of one test's own, with AOF on, which the test may restart.
type Server struct {
	c testcontainers.Container
}

// Start runs a Redis container for this test; it is removed when the test ends.
func Start(t testing.TB, extraArgs ...string) *Server {
	t.Helper()
	if os.Getenv(EnvURL) != "" && !dockerAvailable() {
		t.Skipf("this test restarts Redis and needs Docker; %s cannot be restarted", EnvURL)
	}
	s, err := start(context.Background(), extraArgs...)
	if err != nil {
		t.Fatalf("start Redis container: %v", err)
	}
	t.Cleanup(s.terminate)
	return s
}

// URL is the server's current URL; it changes across a restart, as Docker may map a new port.
func (s *Server) URL(t testing.TB) string {
	t.Helper()
	u, err := s.url(context.Background())
	if err != nil {
		t.Fatalf("Redis URL: %v", err)
	}
	return u
}

// Client is a client of the server at its current URL, closed when the test ends.
func (s *Server) Client(t testing.TB) *redis.Client {
	t.Helper()
	opt, err := redis.ParseURL(s.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	rdb := redis.NewClient(opt)
	t.Cleanup(func() { _ = rdb.Close() })
	return rdb
}

// Restart stops Redis (it writes its AOF on SIGTERM) and starts it again on the same data.
func (s *Server) Restart(t testing.TB) {
	t.Helper()
	ctx := context.Background()
	timeout := 10 * time.Second
	if err := s.c.Stop(ctx, &timeout); err != nil {
		t.Fatalf("stop Redis: %v", err)
	}
	if err := s.c.Start(ctx); err != nil {
		t.Fatalf("start Redis again: %v", err)
	}
	s.waitReady(t)
}

// Kill stops Redis with SIGKILL, losing whatever its fsync policy had not written.
func (s *Server) Kill(t testing.TB) {
	t.Helper()
	ctx := context.Background()
	timeout := time.Duration(0)
	if err := s.c.Stop(ctx, &timeout); err != nil {
		t.Fatalf("kill Redis: %v", err)
	}
}

// StartAgain starts a stopped server again.
func (s *Server) StartAgain(t testing.TB) {
	t.Helper()
	if err := s.c.Start(context.Background()); err != nil {
		t.Fatalf("start Redis again: %v", err)
	}
	s.waitReady(t)
}

// waitReady waits until Redis answers PING (it loads its AOF first), for up to 30 seconds.
func (s *Server) waitReady(t testing.TB) {
	t.Helper()
	opt, err := redis.ParseURL(s.URL(t))
	if err != nil {
		t.Fatalf("parse Redis URL: %v", err)
	}
	c := redis.NewClient(opt)
	defer c.Close()
	deadline := time.Now().Add(30 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		err := c.Ping(ctx).Err()
		cancel()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("Redis not ready 30s after start: %v", err)
		}
		time.Sleep(50 * time.Millisecond) // polling a readiness probe, not waiting out a race
	}
}

// Image is the Redis image tests run.
func Image() string {
	if img := os.Getenv(EnvImage); img != "" {
		return img
	}
	return DefaultImage
}

func start(ctx context.Context, extraArgs ...string) (*Server, error) {
	// The flags work for both the official image (its entrypoint prepends redis-server) and
	// the local image (its entrypoint is redis-server).
	args := append([]string{"--bind", "0.0.0.0", "--protected-mode", "no", "--dir", "/data",
		"--appendonly", "yes", "--save", ""}, extraArgs...)
	c, err := testcontainers.GenericContainer(ctx, testcontainers.GenericContainerRequest{
		ContainerRequest: testcontainers.ContainerRequest{
			Image:        Image(),
			Cmd:          args,
			ExposedPorts: []string{"6379/tcp"},
			// Waiting on the log line needs no shell in the image (the local one has none).
			WaitingFor: wait.ForLog("Ready to accept connections").WithStartupTimeout(60 * time.Second),
		},
		Started: true,
	})
	if err != nil {
		return nil, err
	}
	return &Server{c: c}, nil
}

func (s *Server) url(ctx context.Context) (string, error) {
	port, err := s.c.MappedPort(ctx, "6379/tcp")
	if err != nil {
		return "", err
	}
	// Docker publishes on every host address; loopback is the one a test may talk to.
	host := os.Getenv("TESTCONTAINERS_HOST_OVERRIDE")
	if host == "" {
		host = "127.0.0.1"
	}
	return fmt.Sprintf("redis://%s:%s/0", host, port.Port()), nil
}

func (s *Server) terminate() {
	_ = s.c.Terminate(context.Background())
}

func dockerAvailable() bool {
	p, err := testcontainers.NewDockerProvider()
	if err != nil {
		return false
	}
	defer p.Close()
	return p.Health(context.Background()) == nil
}

// Time is rdb's TIME: the shared clock the services discipline theirs to. It fails the test
// when Redis does not answer.
func Time(t testing.TB, rdb redis.Cmdable) time.Time {
	t.Helper()
	now, err := rdb.Time(context.Background()).Result()
	if err != nil {
		t.Fatalf("Redis TIME: %v", err)
	}
	return now
}
