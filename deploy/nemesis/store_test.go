//go:build nemesis

package nemesis

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/vigil-dev/vigil/pkg/redistest"
	"github.com/vigil-dev/vigil/pkg/wait"
)

// The store's failure detection: a primary silent this long is failed over (Sentinel's
// down-after-milliseconds and failover-timeout), and one that no replica has acknowledged for
// maxLag stops accepting writes (min-replicas-max-lag; min-replicas-to-write is 1).
const (
	downAfter       = 3 * time.Second
	failoverTimeout = 6 * time.Second
	maxLag          = 3 * time.Second
	masterName      = "nemesis"
)

// store is a replicated Redis of the test's own: a primary and two replicas, watched by three
// sentinels (quorum 2), in containers on a docker network made for it. Every node is reached,
// by everyone, through a proxy of the test's that listens on the network's gateway (the host's
// own address on it) and is what the node announces, so the proxy can hold or cut one kind of
// traffic by where it comes from: the services (the host), the replicas (the nodes' network
// addresses) or the sentinels.
type store struct {
	t        *testing.T
	id       string
	network  string
	gw       string
	subnet   *net.IPNet
	nodes    []*storeNode
	sentinel []string // container names
	sentAddr []string // their addresses, as the services reach them

	mu          sync.Mutex
	sentinelIPs map[string]bool
}

// storeNode is one Redis node: its container and the proxy everyone reaches it through.
type storeNode struct {
	s     *store
	name  string
	front *linkProxy
}

// The kinds of connection a node's proxy tells apart by their source address.
const (
	fromClient   = "client"
	fromReplica  = "replica"
	fromSentinel = "sentinel"
)

// startStore runs the store and waits until the primary has both replicas and every sentinel
// knows them and the other two sentinels.
func startStore(t *testing.T) *store {
	t.Helper()
	s := newStore(t)
	for i := range 3 {
		n := &storeNode{s: s, name: fmt.Sprintf("%s-n%d", s.id, i)}
		n.front = newLinkProxy(t, s.gw, s.kind)
		s.nodes = append(s.nodes, n)
	}
	for i, n := range s.nodes {
		// vigil-redis (deploy/redis/build-image.sh) writes these lines to the node's config file
		// on its first start: the role Sentinel gives it later is persisted there, so a node
		// restarted after a failover keeps it (a --replicaof flag would win at every start).
		lines := []string{"bind 0.0.0.0", "protected-mode no", "dir /data",
			"appendonly yes", "appendfsync everysec", `save ""`, "repl-diskless-sync-delay 0",
			"min-replicas-to-write 1", "min-replicas-max-lag " + strconv.Itoa(int(maxLag/time.Second)),
			"replica-announce-ip " + s.gw, "replica-announce-port " + n.front.port()}
		if i > 0 {
			lines = append(lines, "replicaof "+s.gw+" "+s.nodes[0].front.port())
		}
		docker(t, append([]string{"run", "-d", "--name", n.name, "--network", s.network, "--entrypoint", "vigil-redis", redistest.Image()}, lines...)...)
		n.retarget()
	}
	primary := s.nodes[0]
	wait.Within(t, time.Minute, "the primary's two replicas", func() error { return primary.hasReplicas(2) })

	for i := range 3 {
		name := fmt.Sprintf("%s-s%d", s.id, i)
		s.sentinel = append(s.sentinel, name)
		ms := func(d time.Duration) string { return strconv.FormatInt(d.Milliseconds(), 10) }
		docker(t, "run", "-d", "--name", name, "--network", s.network, "--entrypoint", "vigil-sentinel", redistest.Image(),
			"port 26379", "bind 0.0.0.0", "protected-mode no", "dir /data",
			fmt.Sprintf("sentinel monitor %s %s %s 2", masterName, s.gw, primary.front.port()),
			fmt.Sprintf("sentinel down-after-milliseconds %s %s", masterName, ms(downAfter)),
			fmt.Sprintf("sentinel failover-timeout %s %s", masterName, ms(failoverTimeout)),
			fmt.Sprintf("sentinel parallel-syncs %s 2", masterName))
		ip := containerIP(t, name, s.network)
		s.mu.Lock()
		s.sentinelIPs[ip] = true
		s.mu.Unlock()
		s.sentAddr = append(s.sentAddr, net.JoinHostPort(ip, "26379"))
	}
	s.waitHealed()
	return s
}

// newStore makes the store's docker network (its nodes and sentinels removed with it at the
// test's end); the nodes are started by the caller.
func newStore(t *testing.T) *store {
	t.Helper()
	var b [3]byte
	_, _ = rand.Read(b[:])
	s := &store{t: t, id: "nemesis-" + hex.EncodeToString(b[:]), sentinelIPs: map[string]bool{}}
	s.network = s.id
	docker(t, "network", "create", s.network)
	t.Cleanup(func() {
		if t.Failed() {
			s.logContainers(t)
		}
		for _, n := range s.nodes {
			_ = exec.Command("docker", "rm", "-f", n.name).Run()
		}
		for _, name := range s.sentinel {
			_ = exec.Command("docker", "rm", "-f", name).Run()
		}
		_ = exec.Command("docker", "network", "rm", s.network).Run()
	})
	gw := docker(t, "network", "inspect", "-f", "{{range .IPAM.Config}}{{.Gateway}} {{.Subnet}}{{end}}", s.network)
	fields := strings.Fields(gw)
	if len(fields) != 2 {
		t.Fatalf("network %s: gateway and subnet %q", s.network, gw)
	}
	s.gw = fields[0]
	_, subnet, err := net.ParseCIDR(fields[1])
	if err != nil {
		t.Fatal(err)
	}
	s.subnet = subnet

	return s
}

// logContainers logs the end of each node's and sentinel's own log, for a failed run: what
// the sentinels decided and when (+sdown, +odown, +switch-master, +tilt), and what the nodes
// did meanwhile (a full resync, an AOF write waiting on fsync), which the services' errors
// alone cannot tell apart. The containers are removed right after.
func (s *store) logContainers(t *testing.T) {
	t.Helper()
	names := append([]string(nil), s.sentinel...)
	for _, n := range s.nodes {
		names = append(names, n.name)
	}
	for _, name := range names {
		out, err := exec.Command("docker", "logs", "--timestamps", "--tail", "150", name).CombinedOutput()
		t.Logf("%s's log (%v):\n%s", name, err, out)
	}
}

// url is the store as the services reach it: through the sentinels.
func (s *store) url() string {
	return "redis+sentinel://" + strings.Join(s.sentAddr, ",") + "/" + masterName
}

// kind says what a connection from addr is: a sentinel's, a node's (replication), or the
// services' (anything from outside the network, the host's own address on it included).
func (s *store) kind(addr net.Addr) string {
	ta, ok := addr.(*net.TCPAddr)
	if !ok || ta.IP.String() == s.gw || !s.subnet.Contains(ta.IP) {
		return fromClient
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.sentinelIPs[ta.IP.String()] {
		return fromSentinel
	}
	return fromReplica
}

// primary is the node every sentinel names as the primary, once they agree.
func (s *store) primary() *storeNode {
	s.t.Helper()
	var p *storeNode
	wait.Within(s.t, time.Minute, "the sentinels to agree on a primary", func() error {
		var err error
		p, err = s.agreedPrimary()
		return err
	})
	return p
}

func (s *store) agreedPrimary() (*storeNode, error) {
	var agreed string
	for _, a := range s.sentAddr {
		addr, err := sentinelCall(a, func(ctx context.Context, c *redis.SentinelClient) (any, error) {
			return c.GetMasterAddrByName(ctx, masterName).Result()
		})
		if err != nil {
			return nil, err
		}
		hp := addr.([]string)
		port := hp[len(hp)-1]
		if agreed != "" && agreed != port {
			return nil, fmt.Errorf("sentinels name ports %s and %s", agreed, port)
		}
		agreed = port
	}
	for _, n := range s.nodes {
		if n.front.port() == agreed {
			return n, nil
		}
	}
	return nil, fmt.Errorf("no node behind port %s", agreed)
}

// waitFailover waits until the sentinels agree on a primary other than old, and returns it.
func (s *store) waitFailover(old *storeNode) *storeNode {
	s.t.Helper()
	var p *storeNode
	wait.Within(s.t, time.Minute, "a failover away from "+old.name, func() error {
		var err error
		p, err = s.agreedPrimary()
		if err == nil && p == old {
			err = fmt.Errorf("still %s", old.name)
		}
		return err
	})
	return p
}

// waitHealed waits until the store is whole again and returns its primary: the node every
// sentinel names is the primary of two replicas in sync (so every other node is its replica),
// and every sentinel knows two replicas and two other sentinels, none down and no failover in
// progress: the store ready for the next fault. Which node that is, is the sentinels' choice,
// read again at each try: under load they may fail over once more while the store heals (at
// load 41-50 a primary went silent past downAfter 44 s after the SIGKILL fault's failover, no
// fault applied, while the killed node restarted and resynced), and a wait for the node they
// named before would wait for a store that cannot come.
func (s *store) waitHealed() *storeNode {
	s.t.Helper()
	var healed *storeNode
	wait.Within(s.t, 2*time.Minute, "the store healed", func() error {
		primary, err := s.agreedPrimary()
		if err != nil {
			return err
		}
		if err := primary.hasReplicas(2); err != nil {
			return err
		}
		for _, a := range s.sentAddr {
			m, err := sentinelCall(a, func(ctx context.Context, c *redis.SentinelClient) (any, error) {
				return c.Master(ctx, masterName).Result()
			})
			if err != nil {
				return err
			}
			info := m.(map[string]string)
			if info["port"] != primary.front.port() || info["num-slaves"] != "2" || info["num-other-sentinels"] != "2" ||
				strings.Contains(info["flags"], "down") || info["failover-state"] != "" && info["failover-state"] != "none" {
				return fmt.Errorf("sentinel %s: %v", a, info)
			}
			rs, err := sentinelCall(a, func(ctx context.Context, c *redis.SentinelClient) (any, error) {
				return c.Replicas(ctx, masterName).Result()
			})
			if err != nil {
				return err
			}
			for _, r := range rs.([]map[string]string) {
				if strings.Contains(r["flags"], "down") || r["master-link-status"] != "ok" {
					return fmt.Errorf("sentinel %s: replica %v", a, r)
				}
			}
		}
		healed = primary
		return nil
	})
	return healed
}

func sentinelCall(addr string, call func(context.Context, *redis.SentinelClient) (any, error)) (any, error) {
	c := redis.NewSentinelClient(&redis.Options{Addr: addr, DialTimeout: 2 * time.Second, ReadTimeout: 2 * time.Second})
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	return call(ctx, c)
}

// client is a client of the node itself, through its proxy (as a service's).
func (n *storeNode) client() *redis.Client {
	return redis.NewClient(&redis.Options{Addr: net.JoinHostPort(n.s.gw, n.front.port()), DialTimeout: 2 * time.Second,
		ReadTimeout: 2 * time.Second, MaxRetries: -1})
}

// hasReplicas says whether n is a primary with want replicas online.
func (n *storeNode) hasReplicas(want int) error {
	c := n.client()
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	info, err := c.Info(ctx, "replication").Result()
	if err != nil {
		return err
	}
	if !strings.Contains(info, "role:master") {
		return fmt.Errorf("%s is not a primary", n.name)
	}
	if online := strings.Count(info, ",state=online,"); online != want {
		return fmt.Errorf("%s has %d replicas online, want %d", n.name, online, want)
	}
	return nil
}

// role is n's role as it says itself ("master" or "slave").
func (n *storeNode) role() (string, error) {
	c := n.client()
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	r, err := c.Do(ctx, "ROLE").Slice()
	if err != nil {
		return "", err
	}
	role, _ := r[0].(string)
	return role, nil
}

// retarget points n's proxy at its container's current address (a restart may change it).
func (n *storeNode) retarget() {
	n.front.retarget(net.JoinHostPort(containerIP(n.s.t, n.name, n.s.network), "6379"))
}

func (n *storeNode) kill() { docker(n.s.t, "kill", "-s", "KILL", n.name) }

func (n *storeNode) start() {
	docker(n.s.t, "start", n.name)
	n.retarget()
}

func (n *storeNode) pause()   { docker(n.s.t, "pause", n.name) }
func (n *storeNode) unpause() { docker(n.s.t, "unpause", n.name) }

func docker(t *testing.T, args ...string) string {
	t.Helper()
	out, err := exec.Command("docker", args...).CombinedOutput()
	if err != nil {
		t.Fatalf("docker %s: %v: %s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}

func containerIP(t *testing.T, name, network string) string {
	t.Helper()
	return docker(t, "inspect", "-f", "{{(index .NetworkSettings.Networks \""+network+"\").IPAddress}}", name)
}

// linkProxy forwards connections on the host's address of the store's network to a node, and
// holds or cuts them by kind (see store.kind). Held, a connection is read no further in either
// direction (the bytes wait in the kernel, nothing closes); cut, it is closed and what it held
// is thrown away, as a crashed primary's unsent stream is.
//
// A connection's kind is asked of its source address when it is held or cut, not when it is
// accepted: a sentinel dials the primary as soon as it starts, before its address is known to
// be a sentinel's (its container is inspected after docker run), and a kind fixed at accept
// took its links for replication, so holding the replicas' link held the sentinels' too and
// they failed the primary over (TestStoreHeldLinkRefusesEveryWrite, 2 runs in 5).
type linkProxy struct {
	lis    net.Listener
	kind   func(net.Addr) string
	target atomic.Pointer[string]

	mu    sync.Mutex
	held  map[string]chan struct{} // closed on release
	pairs map[net.Conn]net.Conn    // the client side of each connection → the node side
}

func newLinkProxy(t *testing.T, host string, kind func(net.Addr) string) *linkProxy {
	t.Helper()
	l, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		t.Fatal(err)
	}
	p := &linkProxy{lis: l, kind: kind, held: map[string]chan struct{}{}, pairs: map[net.Conn]net.Conn{}}
	none := ""
	p.target.Store(&none)
	t.Cleanup(p.close)
	go p.accept()
	return p
}

func (p *linkProxy) port() string { return strconv.Itoa(p.lis.Addr().(*net.TCPAddr).Port) }

func (p *linkProxy) retarget(target string) { p.target.Store(&target) }

// hold stops the traffic of the kinds given, on every connection of those kinds, old and new.
func (p *linkProxy) hold(kinds ...string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, k := range kinds {
		if p.held[k] == nil {
			p.held[k] = make(chan struct{})
		}
	}
}

// release lets every held kind's traffic through again.
func (p *linkProxy) release() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for k, ch := range p.held {
		close(ch)
		delete(p.held, k)
	}
}

// cut closes every connection of the kinds given, throwing away what they held.
func (p *linkProxy) cut(kinds ...string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for c, up := range p.pairs {
		k := p.kind(c.RemoteAddr())
		for _, want := range kinds {
			if k == want {
				_ = c.Close()
				_ = up.Close()
			}
		}
	}
}

// gate blocks while the traffic of the kind from is now is held.
func (p *linkProxy) gate(from net.Addr) {
	kind := p.kind(from)
	p.mu.Lock()
	ch := p.held[kind]
	p.mu.Unlock()
	if ch != nil {
		<-ch
	}
}

func (p *linkProxy) close() {
	p.release()
	_ = p.lis.Close()
	p.mu.Lock()
	defer p.mu.Unlock()
	for c, up := range p.pairs {
		_ = c.Close()
		_ = up.Close()
	}
}

func (p *linkProxy) accept() {
	for {
		c, err := p.lis.Accept()
		if err != nil {
			return
		}
		go p.serve(c)
	}
}

func (p *linkProxy) serve(c net.Conn) {
	up, err := net.DialTimeout("tcp", *p.target.Load(), 2*time.Second)
	if err != nil {
		_ = c.Close()
		return
	}
	p.mu.Lock()
	p.pairs[c] = up
	p.mu.Unlock()
	var once sync.Once
	end := func() {
		once.Do(func() {
			_ = c.Close()
			_ = up.Close()
			p.mu.Lock()
			delete(p.pairs, c)
			p.mu.Unlock()
		})
	}
	go p.pipe(up, c, c.RemoteAddr(), end)
	go p.pipe(c, up, c.RemoteAddr(), end)
}

// pipe copies src to dst while from's kind is not held; from is the connection's source.
func (p *linkProxy) pipe(dst, src net.Conn, from net.Addr, end func()) {
	defer end()
	buf := make([]byte, 32<<10)
	for {
		p.gate(from)
		n, err := src.Read(buf)
		if n > 0 {
			p.gate(from) // held while reading: these bytes wait too
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}
