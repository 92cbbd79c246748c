//go:build nemesis

package nemesis

import (
	"bufio"
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/resolver"
	"google.golang.org/grpc/resolver/manual"

	"github.com/vigil-dev/vigil/pkg/grpcdial"
	"github.com/vigil-dev/vigil/pkg/redisx"
	"github.com/vigil-dev/vigil/pkg/server"
	chat "github.com/vigil-dev/vigil/services/chat/service"
	lobby "github.com/vigil-dev/vigil/services/lobby/service"
	locks "github.com/vigil-dev/vigil/services/locks/service"
	reservations "github.com/vigil-dev/vigil/services/reservations/service"
	room "github.com/vigil-dev/vigil/services/room/service"
)

// The environment of a replica process: the test binary started again with these set.
const (
	envDomain = "NEMESIS_REPLICA" // locks, reservations or chat
	envRedis  = "NEMESIS_REDIS"   // the Redis URL (the replica's own proxy)
	envPrefix = "NEMESIS_PREFIX"  // the key prefix every replica of the run shares
	envSkew   = "NEMESIS_SKEW"    // how far ahead the replica's clock runs (a duration)
	envLobby  = "NEMESIS_LOBBY"   // a room replica's Lobby address
	// envDurability is the replica's redisx.Config.Durability (async when empty).
	envDurability = "NEMESIS_DURABILITY"
)

// sessionLease is the room replicas' session lease: a session nobody re-attaches stops
// counting this long after its replica last renewed it.
const sessionLease = 6 * time.Second

// alarmLease is the replicas' alarm lease: an alarm a paused or killed replica claimed fires on
// the other one this long after the claim.
const alarmLease = 5 * time.Second

// runReplica serves one domain until SIGTERM, its host clock skewed by envSkew (and
// disciplined to Redis's TIME, as a production host's is), printing "listening ADDR" once it
// answers.
func runReplica(domain string) int {
	skew, _ := time.ParseDuration(os.Getenv(envSkew))
	now := func() time.Time { return time.Now().Add(skew) }
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	core := server.Core{
		Redis:  redisx.Config{URL: os.Getenv(envRedis), Timeout: time.Second, Durability: redisx.Durability(os.Getenv(envDurability))},
		Prefix: os.Getenv(envPrefix),
		Logger: slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError})),
		Now:    now, DisciplineClock: true, DrainTimeout: 3 * time.Second,
	}
	var svc interface {
		Addr() net.Addr
		Serve(context.Context) error
	}
	var err error
	switch domain {
	case "locks":
		svc, err = locks.New(ctx, locks.Options{Core: core, Shards: 4, AlarmLease: alarmLease})
	case "reservations":
		svc, err = reservations.New(ctx, reservations.Options{Core: core, Shards: 4, Lease: alarmLease})
	case "chat":
		svc, err = chat.New(ctx, chat.Options{Core: core, HistoryKeep: 1 << 20})
	case "lobby":
		svc, err = lobby.New(ctx, lobby.Options{Core: core})
	case "rooms":
		svc, err = room.New(ctx, room.Options{Core: core, Shards: 4, LobbyAddr: os.Getenv(envLobby), SessionLease: sessionLease, AlarmLease: alarmLease})
	default:
		fmt.Fprintf(os.Stderr, "unknown domain %q\n", domain)
		return 2
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Printf("listening %s\n", svc.Addr())
	if err := svc.Serve(ctx); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// replica is one replica process, reached through front (its clients) and reaching Redis
// through back (nil when it reaches a store of its own through the store's sentinels).
type replica struct {
	t      *testing.T
	c      *cluster
	front  *proxy
	back   *proxy
	cmd    *exec.Cmd
	exited chan struct{}
}

// start runs the replica process with skew and points front at it.
func (r *replica) start(skew time.Duration) {
	r.t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	redisURL := r.c.redisURL
	if r.back != nil {
		redisURL = "redis://" + r.back.addr() + "/0"
	}
	cmd.Env = append(os.Environ(), envDomain+"="+r.c.domain, envRedis+"="+redisURL,
		envPrefix+"="+r.c.prefix, envSkew+"="+skew.String())
	cmd.Env = append(cmd.Env, r.c.env...)
	cmd.Stderr = r.c.log // the replicas' errors, for a failed run (t.TempDir keeps it on failure: see the path in the log)
	out, err := cmd.StdoutPipe()
	if err != nil {
		r.t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		r.t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "listening ") {
		r.t.Fatalf("%s replica did not start: %q, %v", r.c.domain, line, err)
	}
	r.front.retarget(strings.TrimSpace(strings.TrimPrefix(line, "listening ")))
	r.cmd, r.exited = cmd, exited
}

func (r *replica) signal(sig syscall.Signal) {
	if err := r.cmd.Process.Signal(sig); err != nil {
		r.t.Errorf("signal %v to the %s replica: %v", sig, r.c.domain, err)
	}
}

// stop ends the replica with sig and waits for it to exit (SIGKILL if SIGTERM's drain hangs).
func (r *replica) stop(sig syscall.Signal) {
	r.signal(sig)
	select {
	case <-r.exited:
	case <-time.After(30 * time.Second):
		r.t.Errorf("the %s replica did not exit 30s after %v; killing it", r.c.domain, sig)
		r.signal(syscall.SIGKILL)
		<-r.exited
	}
}

// cluster is two replicas (one for the Lobby) of one domain on one Redis, and a client connection that sees them
// as one name with two addresses (what DNS gives for a scaled service), dialed with grpcdial.
type cluster struct {
	env      []string // more of the replicas' environment
	redisURL string   // a store's redis+sentinel:// URL, which the replicas reach without a proxy
	log      *os.File
	domain   string
	prefix   string
	replicas []*replica
	conn     *grpc.ClientConn
}

func startCluster(t *testing.T, domain, redisURL, prefix string, n int, env ...string) *cluster {
	t.Helper()
	log, err := os.Create(filepath.Join(t.TempDir(), domain+".log"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = log.Close()
		if t.Failed() {
			b, _ := os.ReadFile(log.Name())
			t.Logf("%s replicas' errors:\n%s", domain, lastLines(string(b), 20))
		}
	})
	c := &cluster{env: env, log: log, domain: domain, prefix: prefix}
	u, err := url.Parse(redisURL)
	if err != nil {
		t.Fatal(err)
	}
	// A store's sentinels name its primary's address themselves: its faults are the store's
	// proxies' (store_test.go), not a proxy per replica.
	viaSentinels := u.Scheme == "redis+sentinel"
	if viaSentinels {
		c.redisURL = redisURL
	}
	var addrs []resolver.Address
	for range n {
		r := &replica{t: t, c: c, front: newProxy(t, "127.0.0.1:1")}
		if !viaSentinels {
			r.back = newProxy(t, u.Host)
		}
		r.start(0)
		t.Cleanup(func() {
			r.front.release()
			if r.back != nil {
				r.back.release()
			}
			r.signal(syscall.SIGCONT)
			r.stop(syscall.SIGKILL)
		})
		c.replicas = append(c.replicas, r)
		addrs = append(addrs, resolver.Address{Addr: r.front.addr()})
	}
	mr := manual.NewBuilderWithScheme("nemesis-" + domain)
	mr.InitialState(resolver.State{Addresses: addrs})
	conn, err := grpcdial.New(mr.Scheme()+":///"+domain, grpc.WithResolvers(mr), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	c.conn = conn
	return c
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}
