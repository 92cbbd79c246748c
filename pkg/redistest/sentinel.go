package redistest

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/moby/moby/api/types/container"
	"github.com/redis/go-redis/v9"
	"github.com/testcontainers/testcontainers-go"
	tcwait "github.com/testcontainers/testcontainers-go/wait"

	"github.com/vigil-dev/vigil/pkg/tlstest"
	"github.com/vigil-dev/vigil/pkg/wait"
)

// SentinelMaster is the name the Sentinels of StartSentinel know the primary by.
const SentinelMaster = "vigil"

// SentinelOptions shape the replicated Redis StartSentinel runs. Every zero value has the
// default given in its comment.
type SentinelOptions struct {
	// Replicas of the primary. Default 1.
	Replicas int
	// Sentinels watching it; a failover needs a majority of them. Default 1; negative: none (a
	// primary and replicas only; Primary and WaitFailover then have no one to ask).
	Sentinels int
	// Quorum is how many Sentinels must find the primary down. Default a majority.
	Quorum int
	// DownAfter is how long a primary stays silent before the Sentinels call it down. Default
	// 1s, so that a failover takes a few seconds.
	DownAfter time.Duration
	// NodeArgs are extra redis-server arguments of every data node (primary and replicas), e.g.
	// "--min-replicas-to-write", "1". Default: none beyond AOF on.
	NodeArgs []string
	// Password every data node requires (requirepass, and masterauth since any may become a
	// replica); the Sentinels use it too. Default: none.
	Password string
	// SentinelPassword the Sentinels themselves require. Default: none.
	SentinelPassword string
	// TLS, when set, makes every node and Sentinel speak only TLS with its server certificate
	// (valid for 127.0.0.1), replication included. Default: plaintext.
	TLS *tlstest.Files
}

// Sentinel is a Redis primary with replicas and Sentinels, each a container on the host
// network listening on its own loopback port, so that the addresses the Sentinels announce
// are the ones the test dials. Nodes are named by address (host:port) and keep it across a
// kill and a start.
type Sentinel struct {
	mu        sync.Mutex
	nodes     map[string]testcontainers.Container
	dataAddrs []string
	sentinels []string
	down      time.Duration
	o         SentinelOptions
	tls       *tls.Config
}

// StartSentinel runs a primary, its replicas and Sentinels for this test, and returns once
// every replica is in sync and every Sentinel knows the primary, its replicas and the other
// Sentinels. They are removed when the test ends.
func StartSentinel(t testing.TB, o SentinelOptions) *Sentinel {
	t.Helper()
	if o.Replicas <= 0 {
		o.Replicas = 1
	}
	if o.Sentinels == 0 {
		o.Sentinels = 1
	}
	o.Sentinels = max(o.Sentinels, 0)
	if o.Quorum <= 0 {
		o.Quorum = o.Sentinels/2 + 1
	}
	if o.DownAfter <= 0 {
		o.DownAfter = time.Second
	}
	s := &Sentinel{nodes: map[string]testcontainers.Container{}, down: o.DownAfter, o: o}
	t.Cleanup(s.terminate)
	var files []testcontainers.ContainerFile
	var tlsArgs []string
	var tlsConf string
	if o.TLS != nil {
		pem, err := os.ReadFile(o.TLS.CA)
		if err != nil {
			t.Fatal(err)
		}
		pool := x509.NewCertPool()
		pool.AppendCertsFromPEM(pem)
		s.tls = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
		files = []testcontainers.ContainerFile{
			{HostFilePath: o.TLS.ServerCert, ContainerFilePath: "/tls/server.pem", FileMode: 0o644},
			{HostFilePath: o.TLS.ServerKey, ContainerFilePath: "/tls/server-key.pem", FileMode: 0o644},
			{HostFilePath: o.TLS.CA, ContainerFilePath: "/tls/ca.pem", FileMode: 0o644},
		}
		tlsArgs = []string{"--tls-cert-file", "/tls/server.pem", "--tls-key-file", "/tls/server-key.pem",
			"--tls-ca-cert-file", "/tls/ca.pem", "--tls-replication", "yes", "--tls-auth-clients", "no"}
		tlsConf = "tls-cert-file /tls/server.pem\ntls-key-file /tls/server-key.pem\ntls-ca-cert-file /tls/ca.pem\n" +
			"tls-replication yes\ntls-auth-clients no\n"
	}
	ports, err := freePorts(1 + o.Replicas + o.Sentinels)
	if err != nil {
		t.Fatalf("free ports: %v", err)
	}
	primary := fmt.Sprintf("127.0.0.1:%d", ports[0])
	ctx := context.Background()
	var wg sync.WaitGroup
	errs := make(chan error, len(ports))
	run := func(addr string, req testcontainers.ContainerRequest) {
		defer wg.Done()
		c, err := testcontainers.GenericContainer(ctx, testcontainers.GenericContainerRequest{ContainerRequest: req, Started: true})
		if c != nil {
			s.mu.Lock()
			s.nodes[addr] = c
			s.mu.Unlock()
		}
		if err != nil {
			errs <- fmt.Errorf("start %s: %w", addr, err)
		}
	}
	for i, port := range ports {
		addr := fmt.Sprintf("127.0.0.1:%d", port)
		req := testcontainers.ContainerRequest{
			Image:              Image(),
			HostConfigModifier: func(hc *container.HostConfig) { hc.NetworkMode = "host" },
			WaitingFor:         tcwait.ForLog("Ready to accept connections").WithStartupTimeout(60 * time.Second),
		}
		switch {
		case i <= o.Replicas:
			req.Cmd = []string{"--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--protected-mode", "no",
				"--dir", "/data", "--appendonly", "yes", "--save", ""}
			if o.TLS != nil {
				req.Cmd = append(append([]string{"--port", "0", "--tls-port", strconv.Itoa(port)}, req.Cmd[2:]...), tlsArgs...)
				req.Files = files
			}
			if o.Password != "" {
				req.Cmd = append(req.Cmd, "--requirepass", o.Password, "--masterauth", o.Password)
			}
			req.Cmd = append(req.Cmd, o.NodeArgs...)
			if i > 0 {
				req.Cmd = append(req.Cmd, "--replicaof", "127.0.0.1", strconv.Itoa(ports[0]))
			}
			s.dataAddrs = append(s.dataAddrs, addr)
		default:
			// Sentinel rewrites its configuration file: it must be writable, in a directory the
			// image's user owns.
			listen := fmt.Sprintf("port %d\n", port)
			if o.TLS != nil {
				listen = fmt.Sprintf("port 0\ntls-port %d\n%s", port, tlsConf)
			}
			conf := listen + fmt.Sprintf("bind 127.0.0.1\nprotected-mode no\ndir /data\n"+
				"sentinel monitor %s 127.0.0.1 %d %d\nsentinel down-after-milliseconds %s %d\n"+
				"sentinel failover-timeout %s 5000\nsentinel parallel-syncs %s 1\n",
				SentinelMaster, ports[0], o.Quorum, SentinelMaster, o.DownAfter.Milliseconds(), SentinelMaster, SentinelMaster)
			if o.Password != "" {
				conf += fmt.Sprintf("sentinel auth-pass %s %s\n", SentinelMaster, o.Password)
			}
			if o.SentinelPassword != "" {
				conf += fmt.Sprintf("requirepass %s\n", o.SentinelPassword)
			}
			req.Files = append([]testcontainers.ContainerFile{{Reader: strings.NewReader(conf), ContainerFilePath: "/data/sentinel.conf", FileMode: 0o666}}, files...)
			req.Cmd = []string{"/data/sentinel.conf", "--sentinel"}
			req.WaitingFor = tcwait.ForLog("+monitor master").WithStartupTimeout(60 * time.Second)
			s.sentinels = append(s.sentinels, addr)
		}
		wg.Add(1)
		if i == 0 {
			// Replicas and Sentinels start once the primary answers.
			run(addr, req)
			continue
		}
		go run(addr, req)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("start replicated Redis: %v", err)
	}
	s.waitSynced(t, primary, o.Replicas, o.Sentinels)
	return s
}

// waitSynced waits until primary has replicas online replicas and every Sentinel sees them and
// the other Sentinels.
func (s *Sentinel) waitSynced(t testing.TB, primary string, replicas, sentinels int) {
	t.Helper()
	wait.Within(t, 60*time.Second, "replicas in sync and Sentinels acquainted", func() error {
		info, err := s.info(primary, "replication")
		if err != nil {
			return err
		}
		if n := strings.Count(info, "state=online"); n < replicas {
			return fmt.Errorf("%s: %d of %d replicas online", primary, n, replicas)
		}
		for _, a := range s.sentinels {
			var m map[string]string
			err := s.askSentinel(a, func(c *redis.SentinelClient) (err error) {
				m, err = c.Master(context.Background(), SentinelMaster).Result()
				return err
			})
			if err != nil {
				return fmt.Errorf("sentinel %s: %w", a, err)
			}
			if m["num-slaves"] != strconv.Itoa(replicas) || m["num-other-sentinels"] != strconv.Itoa(sentinels-1) {
				return fmt.Errorf("sentinel %s sees %s replicas and %s other sentinels", a, m["num-slaves"], m["num-other-sentinels"])
			}
			var list []map[string]string
			if err := s.askSentinel(a, func(c *redis.SentinelClient) (err error) {
				list, err = c.Replicas(context.Background(), SentinelMaster).Result()
				return err
			}); err != nil {
				return fmt.Errorf("sentinel %s: %w", a, err)
			}
			for _, r := range list {
				if r["flags"] != "slave" {
					return fmt.Errorf("sentinel %s: replica %s:%s is %s", a, r["ip"], r["port"], r["flags"])
				}
			}
		}
		return nil
	})
}

// URL is the redis+sentinel:// URL of the primary, through every Sentinel (rediss+sentinel://
// with TLS, the nodes' password in it; the Sentinels' own is redisx.Config.SentinelPassword).
func (s *Sentinel) URL() string {
	scheme, auth := "redis+sentinel://", ""
	if s.o.TLS != nil {
		scheme = "rediss+sentinel://"
	}
	if s.o.Password != "" {
		auth = ":" + s.o.Password + "@"
	}
	return scheme + auth + strings.Join(s.sentinels, ",") + "/" + SentinelMaster
}

// Sentinels are the Sentinels' addresses.
func (s *Sentinel) Sentinels() []string { return append([]string(nil), s.sentinels...) }

// Nodes are the data nodes' addresses (primary and replicas, whatever their role now).
func (s *Sentinel) Nodes() []string { return append([]string(nil), s.dataAddrs...) }

// Client is a go-redis failover client of the primary, closed when the test ends.
func (s *Sentinel) Client(t testing.TB) *redis.Client {
	t.Helper()
	c := redis.NewFailoverClient(&redis.FailoverOptions{MasterName: SentinelMaster, SentinelAddrs: s.sentinels,
		Password: s.o.Password, SentinelPassword: s.o.SentinelPassword, TLSConfig: s.tls})
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// NodeClient is a plain client of the node at addr, closed when the test ends.
func (s *Sentinel) NodeClient(t testing.TB, addr string) *redis.Client {
	t.Helper()
	c := redis.NewClient(s.options(addr, false))
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// options are a client's of the node (or, sentinel, the Sentinel) at addr.
func (s *Sentinel) options(addr string, sentinel bool) *redis.Options {
	pw := s.o.Password
	if sentinel {
		pw = s.o.SentinelPassword
	}
	return &redis.Options{Addr: addr, Password: pw, TLSConfig: s.tls, DialTimeout: time.Second, ReadTimeout: time.Second, MaxRetries: -1}
}

// Primary is the address the first Sentinel that answers names as the primary now.
func (s *Sentinel) Primary(t testing.TB) string {
	t.Helper()
	var addr string
	wait.For(t, "a Sentinel naming the primary", func() error {
		var err error
		addr, err = s.primary()
		return err
	})
	return addr
}

func (s *Sentinel) primary() (string, error) {
	var last error
	for _, a := range s.sentinels {
		var hp []string
		err := s.askSentinel(a, func(c *redis.SentinelClient) (err error) {
			hp, err = c.GetMasterAddrByName(context.Background(), SentinelMaster).Result()
			return err
		})
		if err == nil {
			return hp[0] + ":" + hp[1], nil
		}
		last = err
	}
	return "", fmt.Errorf("no Sentinel names the primary: %v", last)
}

// Replicas are the data nodes other than the primary the Sentinels name now.
func (s *Sentinel) Replicas(t testing.TB) []string {
	t.Helper()
	p := s.Primary(t)
	var out []string
	for _, a := range s.dataAddrs {
		if a != p {
			out = append(out, a)
		}
	}
	return out
}

// WaitFailover waits until the Sentinels name a primary other than from and that node
// answers as a primary (role:master), and returns it. A failover takes DownAfter plus a few
// seconds.
func (s *Sentinel) WaitFailover(t testing.TB, from string) string {
	t.Helper()
	var to string
	wait.Within(t, 60*time.Second, "a Sentinel failover away from "+from, func() error {
		addr, err := s.primary()
		if err != nil {
			return err
		}
		if addr == from {
			return fmt.Errorf("the Sentinels still name %s", addr)
		}
		info, err := s.info(addr, "replication")
		if err != nil {
			return err
		}
		if !strings.Contains(info, "role:master") {
			return fmt.Errorf("%s, named primary, does not answer as one yet", addr)
		}
		to = addr
		return nil
	})
	return to
}

// Kill stops the node (or Sentinel) at addr with SIGKILL, losing whatever it had not written.
func (s *Sentinel) Kill(t testing.TB, addr string) {
	t.Helper()
	timeout := time.Duration(0)
	if err := s.node(t, addr).Stop(context.Background(), &timeout); err != nil {
		t.Fatalf("kill %s: %v", addr, err)
	}
}

// Start starts a killed node again on its data (the AOF it had), at its address. A former
// primary comes back as one until the Sentinels tell it otherwise.
func (s *Sentinel) Start(t testing.TB, addr string) {
	t.Helper()
	if err := s.node(t, addr).Start(context.Background()); err != nil {
		t.Fatalf("start %s again: %v", addr, err)
	}
	wait.Within(t, 60*time.Second, addr+" answering after its start", func() error {
		_, err := s.info(addr, "server")
		return err
	})
}

// Pause freezes the node at addr (docker pause): its connections stay open and nothing
// answers, as when a partition drops every packet.
func (s *Sentinel) Pause(t testing.TB, addr string) { t.Helper(); s.docker(t, "pause", addr) }

// Unpause lets a paused node answer again.
func (s *Sentinel) Unpause(t testing.TB, addr string) { t.Helper(); s.docker(t, "unpause", addr) }

func (s *Sentinel) docker(t testing.TB, verb, addr string) {
	t.Helper()
	out, err := exec.Command("docker", verb, s.node(t, addr).GetContainerID()).CombinedOutput()
	if err != nil {
		t.Fatalf("docker %s %s: %v: %s", verb, addr, err, out)
	}
}

func (s *Sentinel) node(t testing.TB, addr string) testcontainers.Container {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	c, ok := s.nodes[addr]
	if !ok {
		t.Fatalf("no node %s", addr)
	}
	return c
}

func (s *Sentinel) info(addr, section string) (string, error) {
	c := redis.NewClient(s.options(addr, false))
	defer c.Close()
	return c.Info(context.Background(), section).Result()
}

// askSentinel runs fn on a client of the Sentinel at addr, closed after.
func (s *Sentinel) askSentinel(addr string, fn func(*redis.SentinelClient) error) error {
	c := redis.NewSentinelClient(s.options(addr, true))
	defer c.Close()
	return fn(c)
}

func (s *Sentinel) terminate() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, c := range s.nodes {
		_ = c.Terminate(context.Background())
	}
}
