package redisx

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"
)

// node is one Redis node the start-up checks read.
type node struct {
	addr    string
	c       *redis.Client
	primary bool
}

// fsyncSettings are what every node must run under Fsync on Redis older than 7.2, where no
// WAITAOF exists: each write on disk before its reply (and before a replica's acknowledgment).
var fsyncSettings = [][2]string{{"appendonly", "yes"}, {"appendfsync", "always"}, {"no-appendfsync-on-rewrite", "no"}}

// checkDurability checks that the Redis c reaches can keep cfg.Durability's promise, sets pol
// to what each write then waits for, and logs one line saying what is promised:
//   - Async: nothing is checked; the line says what a primary's loss would cost.
//   - Replica: every primary (each Cluster master) has a connected replica.
//   - Fsync: on Redis 7.2 and newer, every node runs appendonly yes (WAITAOF needs it); on
//     older Redis, every node reachable (the primary, the replicas it or the Sentinels name,
//     every Cluster node) runs appendonly yes, appendfsync always, no-appendfsync-on-rewrite no.
//     A primary with replicas also waits for one of them.
func checkDurability(ctx context.Context, c redis.UniversalClient, cfg Config, pol *policy) error {
	if cfg.Durability == Async {
		if cfg.Logger != nil {
			cfg.Logger.Info("redis durability async: a write is acknowledged once the Redis primary applied it; "+
				"losing the primary loses the acknowledged writes no replica had yet (and, under appendfsync everysec, "+
				"a host crash loses up to a second of them); set VIGIL_REDIS_DURABILITY=replica or fsync to wait for them",
				"event", "redis_durability", "durability", string(Async))
		}
		return nil
	}
	nodes, closeNodes, err := reachableNodes(ctx, c, cfg)
	defer closeNodes()
	if err != nil {
		return err
	}
	withReplica, without := 0, []string{}
	for _, n := range nodes {
		if !n.primary {
			continue
		}
		info, err := n.c.Info(ctx, "replication").Result()
		if err != nil {
			return fmt.Errorf("redis durability %s: read INFO replication of %s: %w", cfg.Durability, n.addr, err)
		}
		if infoField(info, "role") != "master" {
			return fmt.Errorf("redis durability %s: %s is a replica (role:%s), not a primary; point Vigil at the primary "+
				"(or at Sentinels or a Cluster, which find it)", cfg.Durability, n.addr, infoField(info, "role"))
		}
		if connected, _ := strconv.Atoi(infoField(info, "connected_slaves")); connected > 0 {
			withReplica++
		} else {
			without = append(without, n.addr)
		}
	}
	if cfg.Durability == Replica && len(without) > 0 {
		return fmt.Errorf("redis durability replica needs a replica of every primary, and the Redis primary at %s has none connected "+
			"(INFO replication: connected_slaves:0); attach one (replicaof %s on another Redis), or set the durability to async or fsync "+
			"(VIGIL_REDIS_DURABILITY, -redis-durability)", strings.Join(without, ", "), strings.Join(without, ", "))
	}
	if cfg.Durability == Fsync && withReplica > 0 && len(without) > 0 {
		return fmt.Errorf("redis durability fsync: the Redis primary at %s has no replica connected while others have; "+
			"give every primary a replica, or none", strings.Join(without, ", "))
	}
	replicas := int32(0)
	if withReplica > 0 {
		replicas = 1
	}
	aof := false
	if cfg.Durability == Fsync {
		if aof, err = checkFsync(ctx, nodes); err != nil {
			return err
		}
	}
	pol.replicas.Store(replicas)
	pol.aof.Store(aof)
	if cfg.Logger != nil {
		how := "once a replica has it (WAIT)"
		switch {
		case aof:
			how = fmt.Sprintf("once it is fsynced on the primary and %d replica(s) (WAITAOF)", replicas)
		case cfg.Durability == Fsync && replicas > 0:
			how = "once a replica has it (WAIT), every node fsyncing each write (appendfsync always)"
		case cfg.Durability == Fsync:
			how = "once it is on the primary's disk (appendfsync always; no replica)"
		}
		cfg.Logger.Info("redis durability "+string(cfg.Durability)+": a write is acknowledged "+how,
			"event", "redis_durability", "durability", string(cfg.Durability), "waitTimeout", pol.wait.String(),
			"nodesChecked", len(nodes))
	}
	return nil
}

// checkFsync checks every node's disk settings for Fsync, and reports whether WAITAOF does the
// work (Redis 7.2 or newer on every primary).
func checkFsync(ctx context.Context, nodes []node) (waitAOF bool, err error) {
	waitAOF = true
	for _, n := range nodes {
		if !n.primary {
			continue
		}
		info, err := n.c.Info(ctx, "server").Result()
		if err != nil {
			return false, fmt.Errorf("redis durability fsync: read INFO server of %s: %w", n.addr, err)
		}
		if !atLeast(infoField(info, "redis_version"), 7, 2) {
			waitAOF = false
		}
	}
	settings := fsyncSettings
	if waitAOF {
		settings = fsyncSettings[:1] // WAITAOF needs the AOF on; it fsyncs what it waits for itself
	}
	for _, n := range nodes {
		for _, want := range settings {
			got, err := n.c.ConfigGet(ctx, want[0]).Result()
			if err != nil {
				return false, fmt.Errorf("redis durability fsync: read CONFIG GET %s on %s: %w (fsync on Redis before 7.2 "+
					"checks each node's settings, so CONFIG GET must be allowed)", want[0], n.addr, err)
			}
			if !strings.EqualFold(got[want[0]], want[1]) {
				return false, fmt.Errorf("redis durability fsync: the Redis node at %s runs %s %s, and fsync needs %s %s on every node "+
					"(set it in that node's redis.conf, or CONFIG SET %s %s and CONFIG REWRITE), or set the durability to replica or async",
					n.addr, want[0], orNone(got[want[0]]), want[0], want[1], want[0], want[1])
			}
		}
	}
	return waitAOF, nil
}

// reachableNodes lists the nodes the checks read: for a Cluster, every node; for a primary
// named by Sentinels, the primary and the replicas the Sentinels list; for one server, it and
// the replicas its INFO lists. A replica that does not answer is left out (its primary's count
// of connected replicas still tells whether one exists). close closes the clients made here.
func reachableNodes(ctx context.Context, c redis.UniversalClient, cfg Config) (nodes []node, close func(), err error) {
	var made []*redis.Client
	close = func() {
		for _, m := range made {
			_ = m.Close()
		}
	}
	if cc, ok := c.(*redis.ClusterClient); ok {
		// ForEachMaster and ForEachSlave call on a goroutine per node.
		var mu sync.Mutex
		add := func(n node) error {
			mu.Lock()
			defer mu.Unlock()
			nodes = append(nodes, n)
			return nil
		}
		if err := cc.ForEachMaster(ctx, func(ctx context.Context, n *redis.Client) error {
			return add(node{addr: n.Options().Addr, c: n, primary: true})
		}); err != nil {
			return nil, close, fmt.Errorf("redis durability: list the cluster's masters: %w", err)
		}
		if err := cc.ForEachSlave(ctx, func(ctx context.Context, n *redis.Client) error {
			return add(node{addr: n.Options().Addr, c: n})
		}); err != nil {
			return nil, close, fmt.Errorf("redis durability: list the cluster's replicas: %w", err)
		}
		return nodes, close, nil
	}
	one := c.(*redis.Client)
	base := one.Options()
	var replicaAddrs []string
	primaryAddr := base.Addr
	if len(cfg.SentinelAddrs) > 0 || IsSentinelURL(cfg.URL) {
		fo, err := cfg.failoverOptions()
		if err != nil {
			return nil, close, err
		}
		primaryAddr, replicaAddrs, err = askSentinels(ctx, fo)
		if err != nil {
			return nil, close, err
		}
	} else {
		info, err := one.Info(ctx, "replication").Result()
		if err != nil {
			return nil, close, fmt.Errorf("redis durability: read INFO replication of %s: %w", primaryAddr, err)
		}
		replicaAddrs = infoReplicas(info)
	}
	nodes = append(nodes, node{addr: primaryAddr, c: one, primary: true})
	for _, addr := range replicaAddrs {
		rc := redis.NewClient(&redis.Options{
			Addr: addr, Username: base.Username, Password: base.Password, TLSConfig: base.TLSConfig,
			DialTimeout: base.DialTimeout, ReadTimeout: base.ReadTimeout, WriteTimeout: base.WriteTimeout,
			MaxRetries: -1, DisableIdentity: true,
		})
		made = append(made, rc)
		if err := rc.Ping(ctx).Err(); err != nil {
			if cfg.Logger != nil {
				cfg.Logger.Warn("redis durability: a replica does not answer; its settings are not checked",
					"event", "redis_durability_unchecked", "replica", addr, "err", err)
			}
			continue
		}
		nodes = append(nodes, node{addr: addr, c: rc})
	}
	return nodes, close, nil
}

// askSentinels is the primary's address and its replicas' as the first Sentinel that answers
// knows them.
func askSentinels(ctx context.Context, fo *redis.FailoverOptions) (primary string, replicas []string, err error) {
	var errs []error
	for _, a := range fo.SentinelAddrs {
		sc := redis.NewSentinelClient(&redis.Options{
			Addr: a, Username: fo.SentinelUsername, Password: fo.SentinelPassword, TLSConfig: fo.TLSConfig,
			DialTimeout: fo.DialTimeout, ReadTimeout: fo.ReadTimeout, WriteTimeout: fo.WriteTimeout, MaxRetries: -1,
			DisableIdentity: true,
		})
		hp, err := sc.GetMasterAddrByName(ctx, fo.MasterName).Result()
		var list []map[string]string
		if err == nil {
			list, err = sc.Replicas(ctx, fo.MasterName).Result()
		}
		_ = sc.Close()
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", a, err))
			continue
		}
		for _, r := range list {
			// Even one the Sentinel finds down or not yet linked: whether it answers decides.
			replicas = append(replicas, net.JoinHostPort(r["ip"], r["port"]))
		}
		return net.JoinHostPort(hp[0], hp[1]), replicas, nil
	}
	return "", nil, fmt.Errorf("redis durability: no Sentinel told the primary %q and its replicas: %w", fo.MasterName, errors.Join(errs...))
}

// infoField is field's value in an INFO reply.
func infoField(info, field string) string {
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), field+":"); ok {
			return v
		}
	}
	return ""
}

// infoReplicas are the host:port of the replicas an INFO replication reply lists
// (slave0:ip=...,port=...,state=online,...), online ones only.
func infoReplicas(info string) []string {
	var out []string
	for _, line := range strings.Split(info, "\n") {
		line = strings.TrimSpace(line)
		if !strings.HasPrefix(line, "slave") || !strings.Contains(line, ":ip=") {
			continue
		}
		_, kv, _ := strings.Cut(line, ":")
		f := map[string]string{}
		for _, p := range strings.Split(kv, ",") {
			k, v, _ := strings.Cut(p, "=")
			f[k] = v
		}
		if f["state"] == "online" {
			out = append(out, net.JoinHostPort(f["ip"], f["port"]))
		}
	}
	return out
}

// atLeast reports whether version (7.0.15) is major.minor or newer.
func atLeast(version string, major, minor int) bool {
	parts := strings.SplitN(version, ".", 3)
	if len(parts) < 2 {
		return false
	}
	ma, err1 := strconv.Atoi(parts[0])
	mi, err2 := strconv.Atoi(parts[1])
	if err1 != nil || err2 != nil {
		return false
	}
	return ma > major || ma == major && mi >= minor
}

func orNone(v string) string {
	if v == "" {
		return `""`
	}
	return v
}
