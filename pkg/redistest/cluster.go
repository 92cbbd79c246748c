package redistest

import (
	"context"
	"fmt"
	"io"
	"net"
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
	"github.com/testcontainers/testcontainers-go/wait"
)

// EnvCluster switches the helpers that hand out a Redis (Universal, Config) to a Redis Cluster:
// a comma-separated list of seed addresses of an existing cluster, or "start" to start one
// (3 masters, 1 replica each) per test binary. Client and URL keep handing out a single server.
const EnvCluster = "VIGIL_TEST_REDIS_CLUSTER"

var sharedCluster struct {
	once  sync.Once
	addrs []string
	c     *Cluster
	err   error
}

// clusterAddrs is the cluster the Universal and Config helpers use, or nil for none.
func clusterAddrs(t testing.TB) []string {
	t.Helper()
	v := os.Getenv(EnvCluster)
	if v == "" {
		return nil
	}
	sharedCluster.once.Do(func() {
		if v != "start" {
			for _, a := range strings.Split(v, ",") {
				if a = strings.TrimSpace(a); a != "" {
					sharedCluster.addrs = append(sharedCluster.addrs, a)
				}
			}
			return
		}
		sharedCluster.c, sharedCluster.err = startCluster(context.Background(), 3)
		if sharedCluster.err == nil {
			sharedCluster.addrs = sharedCluster.c.Addrs()
		}
	})
	if sharedCluster.err != nil {
		t.Fatalf("start Redis Cluster (%s=start): %v", EnvCluster, sharedCluster.err)
	}
	return sharedCluster.addrs
}

// Universal is Client, or, when EnvCluster is set, a client of that Redis Cluster: tests written
// against it run unchanged on one server and on a cluster. The key prefix is unique to the test;
// its keys are deleted (on every master) when the test ends.
func Universal(t testing.TB) (redis.UniversalClient, string) {
	t.Helper()
	addrs := clusterAddrs(t)
	if addrs == nil {
		return Client(t)
	}
	c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs})
	// Load the slot map now, so that a test's first command costs what every later one does.
	if err := c.Ping(context.Background()).Err(); err != nil {
		t.Fatalf("ping Redis Cluster: %v", err)
	}
	prefix := Prefix(t)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = c.ForEachMaster(ctx, func(ctx context.Context, n *redis.Client) error {
			iter := n.Scan(ctx, 0, prefix+"*", 1000).Iterator()
			for iter.Next(ctx) {
				n.Del(ctx, iter.Val())
			}
			return nil
		})
		_ = c.Close()
	})
	return c, prefix
}

// Target is the Redis that Universal hands out, for tests that start services: the shared
// server's URL, or, when EnvCluster is set, the cluster's seed addresses (and url is empty).
// redisx.Config{URL: url, ClusterAddrs: cluster} connects to it.
func Target(t testing.TB) (url string, cluster []string) {
	t.Helper()
	if addrs := clusterAddrs(t); addrs != nil {
		return "", addrs
	}
	return URL(t), nil
}

// HashTag is the part of key Redis Cluster hashes to pick its slot: the first {...} with
// something inside, else the whole key (the rule of the cluster specification). Tests use it to
// check that the keys a script takes share one slot.
func HashTag(key string) string {
	for i := 0; i < len(key); i++ {
		if key[i] != '{' {
			continue
		}
		for j := i + 1; j < len(key); j++ {
			if key[j] == '}' {
				if j == i+1 {
					return key
				}
				return key[i+1 : j]
			}
		}
		return key
	}
	return key
}

// Cluster is a Redis Cluster of containers on the host network, listening on loopback only, so
// that the test process reaches every node at the address the cluster announces.
type Cluster struct {
	nodes []*clusterNode
}

type clusterNode struct {
	addr string
	c    testcontainers.Container
}

// StartCluster runs a Redis Cluster of its own for this test: masters masters with one replica
// each, created with redis-cli --cluster create, AOF on, a node timeout of 1 s so a failover
// takes a few seconds. It is removed when the test ends.
func StartCluster(t testing.TB, masters int) *Cluster {
	t.Helper()
	c, err := startCluster(context.Background(), masters)
	if err != nil {
		t.Fatalf("start Redis Cluster: %v", err)
	}
	t.Cleanup(c.terminate)
	return c
}

// Addrs are the seed addresses of every node, host:port.
func (c *Cluster) Addrs() []string {
	out := make([]string, len(c.nodes))
	for i, n := range c.nodes {
		out[i] = n.addr
	}
	return out
}

// Client is a cluster client of c, closed when the test ends.
func (c *Cluster) Client(t testing.TB) *redis.ClusterClient {
	t.Helper()
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.Addrs()})
	t.Cleanup(func() { _ = cc.Close() })
	return cc
}

// MasterOf is the address of the master serving key's slot, as the cluster sees it now.
func (c *Cluster) MasterOf(t testing.TB, key string) string {
	t.Helper()
	ctx := context.Background()
	for _, n := range c.nodes {
		if !n.c.IsRunning() {
			continue
		}
		nc := redis.NewClient(&redis.Options{Addr: n.addr})
		slot, err := nc.ClusterKeySlot(ctx, key).Result()
		var slots []redis.ClusterSlot
		if err == nil {
			slots, err = nc.ClusterSlots(ctx).Result()
		}
		_ = nc.Close()
		if err != nil {
			continue
		}
		for _, r := range slots {
			if int(slot) >= r.Start && int(slot) <= r.End && len(r.Nodes) > 0 {
				return r.Nodes[0].Addr
			}
		}
	}
	t.Fatalf("no node knows the master of %q", key)
	return ""
}

// Kill stops the node at addr with SIGKILL.
func (c *Cluster) Kill(t testing.TB, addr string) {
	t.Helper()
	for _, n := range c.nodes {
		if n.addr == addr {
			timeout := time.Duration(0)
			if err := n.c.Stop(context.Background(), &timeout); err != nil {
				t.Fatalf("kill %s: %v", addr, err)
			}
			return
		}
	}
	t.Fatalf("no node %s", addr)
}

// Start starts a killed node again on its data (AOF and nodes.conf): a master that was failed
// over comes back as a replica of the node that replaced it.
func (c *Cluster) Start(t testing.TB, addr string) {
	t.Helper()
	for _, n := range c.nodes {
		if n.addr == addr {
			if err := n.c.Start(context.Background()); err != nil {
				t.Fatalf("start %s again: %v", addr, err)
			}
			return
		}
	}
	t.Fatalf("no node %s", addr)
}

// WaitHealthy waits, up to timeout, until every live node reports cluster_state:ok and agrees
// that each slot has a master among the live nodes: after a failover, a replica took over.
func (c *Cluster) WaitHealthy(t testing.TB, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := c.healthy(context.Background())
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("cluster not healthy after %v: %v", timeout, err)
		}
		time.Sleep(100 * time.Millisecond) // polling the cluster's state, bounded by the deadline
	}
}

func (c *Cluster) healthy(ctx context.Context) error {
	live := map[string]bool{}
	for _, n := range c.nodes {
		if n.c.IsRunning() {
			live[n.addr] = true
		}
	}
	for _, n := range c.nodes {
		if !live[n.addr] {
			continue
		}
		nc := redis.NewClient(&redis.Options{Addr: n.addr, DialTimeout: time.Second, ReadTimeout: time.Second})
		info, err := nc.ClusterInfo(ctx).Result()
		if err != nil {
			_ = nc.Close()
			return fmt.Errorf("%s: %w", n.addr, err)
		}
		if !strings.Contains(info, "cluster_state:ok") {
			_ = nc.Close()
			return fmt.Errorf("%s: cluster_state not ok", n.addr)
		}
		slots, err := nc.ClusterSlots(ctx).Result()
		_ = nc.Close()
		if err != nil {
			return fmt.Errorf("%s: %w", n.addr, err)
		}
		covered := 0
		for _, r := range slots {
			if len(r.Nodes) == 0 || !live[r.Nodes[0].Addr] {
				return fmt.Errorf("%s: slots %d-%d served by %v, not a live node", n.addr, r.Start, r.End, r.Nodes)
			}
			covered += int(r.End - r.Start + 1)
		}
		if covered != 16384 {
			return fmt.Errorf("%s: %d of 16384 slots covered", n.addr, covered)
		}
	}
	return nil
}

func (c *Cluster) terminate() {
	for _, n := range c.nodes {
		_ = n.c.Terminate(context.Background())
	}
}

// startCluster starts 2*masters nodes on free loopback ports of the host network and joins
// them with redis-cli --cluster create (run inside the first node's container, so the host
// needs no redis-cli).
func startCluster(ctx context.Context, masters int) (*Cluster, error) {
	c := &Cluster{}
	ports, err := freePorts(4 * masters) // a client port and a cluster bus port per node
	if err != nil {
		return nil, err
	}
	for i := range 2 * masters {
		port, bus := ports[2*i], ports[2*i+1]
		args := []string{"--port", strconv.Itoa(port), "--cluster-port", strconv.Itoa(bus),
			"--bind", "127.0.0.1", "--protected-mode", "no", "--dir", "/data",
			"--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
			"--cluster-node-timeout", "1000", "--appendonly", "yes", "--save", ""}
		nc, err := testcontainers.GenericContainer(ctx, testcontainers.GenericContainerRequest{
			ContainerRequest: testcontainers.ContainerRequest{
				Image: Image(),
				Cmd:   args,
				HostConfigModifier: func(hc *container.HostConfig) {
					hc.NetworkMode = "host"
				},
				WaitingFor: wait.ForLog("Ready to accept connections").WithStartupTimeout(60 * time.Second),
			},
			Started: true,
		})
		if err != nil {
			c.terminate()
			return nil, err
		}
		c.nodes = append(c.nodes, &clusterNode{addr: fmt.Sprintf("127.0.0.1:%d", port), c: nc})
	}
	cmd := append([]string{"redis-cli", "--cluster", "create"}, c.Addrs()...)
	cmd = append(cmd, "--cluster-replicas", "1", "--cluster-yes")
	code, out, err := c.nodes[0].c.Exec(ctx, cmd)
	if err != nil || code != 0 {
		text := ""
		if out != nil {
			b, _ := io.ReadAll(out)
			text = string(b)
		}
		c.terminate()
		return nil, fmt.Errorf("redis-cli --cluster create: exit %d, %v: %s", code, err, text)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		err := c.healthy(ctx)
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			c.terminate()
			return nil, fmt.Errorf("cluster not ready 30s after create: %w", err)
		}
		time.Sleep(100 * time.Millisecond) // polling the cluster's state, bounded by the deadline
	}
	if err := c.waitReplicasLinked(ctx, masters); err != nil {
		c.terminate()
		return nil, err
	}
	return c, nil
}

// waitReplicasLinked waits until every master has a replica in sync, so that a failover can
// happen from the first write on.
func (c *Cluster) waitReplicasLinked(ctx context.Context, masters int) error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		linked := 0
		for _, n := range c.nodes {
			nc := redis.NewClient(&redis.Options{Addr: n.addr})
			info, err := nc.Info(ctx, "replication").Result()
			_ = nc.Close()
			if err == nil && strings.Contains(info, "role:master") && strings.Contains(info, "state=online") {
				linked++
			}
		}
		if linked >= masters {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d of %d masters have an online replica after 30s", linked, masters)
		}
		time.Sleep(100 * time.Millisecond) // polling replication state, bounded by the deadline
	}
}

// freePorts finds n distinct free TCP ports on loopback.
func freePorts(n int) ([]int, error) {
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			_ = l.Close()
		}
	}()
	var ports []int
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// Pause freezes Redis (docker pause): connections stay open and nothing answers, as when a
// network partition drops every packet.
func (s *Server) Pause(t testing.TB) {
	t.Helper()
	s.docker(t, "pause")
}

// Unpause lets a paused Redis answer again.
func (s *Server) Unpause(t testing.TB) {
	t.Helper()
	s.docker(t, "unpause")
}

func (s *Server) docker(t testing.TB, verb string) {
	t.Helper()
	out, err := exec.Command("docker", verb, s.c.GetContainerID()).CombinedOutput()
	if err != nil {
		t.Fatalf("docker %s: %v: %s", verb, err, out)
	}
}

// ReplicaOf is the address of a replica of the master at addr, as that master lists it.
func (c *Cluster) ReplicaOf(t testing.TB, master string) string {
	t.Helper()
	nc := redis.NewClient(&redis.Options{Addr: master})
	defer nc.Close()
	info, err := nc.Info(context.Background(), "replication").Result()
	if err != nil {
		t.Fatalf("INFO replication of %s: %v", master, err)
	}
	for _, line := range strings.Split(info, "\n") {
		if !strings.HasPrefix(line, "slave0:") {
			continue
		}
		var ip, port string
		for _, kv := range strings.Split(strings.TrimSpace(strings.TrimPrefix(line, "slave0:")), ",") {
			k, v, _ := strings.Cut(kv, "=")
			switch k {
			case "ip":
				ip = v
			case "port":
				port = v
			}
		}
		return net.JoinHostPort(ip, port)
	}
	t.Fatalf("master %s lists no replica", master)
	return ""
}

// Pause freezes the node at addr (docker pause): connections stay open and nothing answers.
func (c *Cluster) Pause(t testing.TB, addr string) { t.Helper(); c.dockerNode(t, "pause", addr) }

// Unpause lets a paused node answer again.
func (c *Cluster) Unpause(t testing.TB, addr string) { t.Helper(); c.dockerNode(t, "unpause", addr) }

func (c *Cluster) dockerNode(t testing.TB, verb, addr string) {
	t.Helper()
	for _, n := range c.nodes {
		if n.addr == addr {
			out, err := exec.Command("docker", verb, n.c.GetContainerID()).CombinedOutput()
			if err != nil {
				t.Fatalf("docker %s %s: %v: %s", verb, addr, err, out)
			}
			return
		}
	}
	t.Fatalf("no node %s", addr)
}
