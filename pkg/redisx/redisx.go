// Package redisx opens Redis connections (one server, a primary watched by Redis Sentinel, or a
// Redis Cluster), makes writes as durable as Config.Durability asks, and runs Lua scripts in a
// way that also works inside pipelines and after a Redis restart.
package redisx

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
)

// Config says which Redis to use: ClusterAddrs when set, else SentinelAddrs, else URL.
type Config struct {
	// URL of one Redis server: redis://[user:password@]host:port[/db], or rediss:// for TLS;
	// or of a primary watched by Sentinels:
	// redis+sentinel://[user:password@]host1:port1,host2:port2/mastername[/db]
	// (rediss+sentinel:// for TLS), the user and password being the Redis nodes'.
	URL string
	// ClusterAddrs are seed addresses (host:port) of a Redis Cluster. Empty means no cluster.
	ClusterAddrs []string
	// SentinelAddrs are addresses (host:port) of Redis Sentinels watching the primary named
	// MasterName, the same as a redis+sentinel:// URL. Default: none.
	SentinelAddrs []string
	// MasterName is the name the Sentinels know the primary by; required with SentinelAddrs.
	MasterName string
	// DB is the database of a primary named by SentinelAddrs. Default 0.
	DB int
	// SentinelPassword authenticates to the Sentinels themselves (requirepass in their
	// configuration). Default: none; the nodes' password is Password or the URL's.
	SentinelPassword string
	// Durability says when a write counts as done: Async (the default: once the primary
	// applied it), Replica (once a replica has it too) or Fsync (on disk as well). Open checks
	// that the Redis it reaches can keep the promise, and refuses to start when it cannot. Under
	// Replica and Fsync, a batch that holds a write waits up to half of Timeout for its
	// replica (WAIT); one not confirmed in time fails with ErrOutcomeUnknown.
	Durability Durability
	// Logger gets one line at Open saying what the durability setting promises (and, under
	// Async, what losing the primary would cost). Default: nil, silent.
	Logger *slog.Logger
	// Password for the cluster's nodes, or for a single server whose URL has none. Default:
	// none.
	Password string
	// PasswordFile names a file holding the password (a container secret), read by Open when
	// Password is empty; surrounding white space is dropped. Default: none.
	PasswordFile string
	// PoolSize per node; zero means go-redis's default (10 per CPU).
	PoolSize int
	// TLS secures the link (see tls.go). Default: off; a rediss:// URL turns TLS on by itself.
	TLS TLS
	// Timeout bounds dialling, waiting for a pooled connection, and each read and write, so that
	// a Redis that stops answering (paused, partitioned) fails a call within about twice this
	// instead of hanging for go-redis's 5 s dial and 3 s read defaults. A call that timed out is
	// not retried (its outcome is unknown; callers' scripts are idempotent and they may retry);
	// stale pooled connections are still replaced before use. A redis:// URL's dial_timeout,
	// read_timeout, write_timeout, pool_timeout and max_retries parameters win. Under Replica
	// and Fsync durability, WAIT's own timeout is half of this (the read timeout), so that a
	// replica that does not answer shows as ErrOutcomeUnknown, never as a read timeout. Default:
	// UnsetTimeout (DefaultTimeout outside tests).
	Timeout time.Duration
	// Metrics is where the client registers vigil_redis_script_duration_seconds (every client
	// registering on one Registerer shares one histogram). Default: prometheus.DefaultRegisterer.
	Metrics prometheus.Registerer
	// ClusterRefresh is how often a cluster client in use re-reads the slot map; it is how the
	// client finds the replica that took over a failed master (a refused connection does not
	// make go-redis look). Default DefaultClusterRefresh; go-redis's own default is 60 s.
	ClusterRefresh time.Duration
}

// DefaultTimeout is Config.Timeout's default in production: a failed Redis shows as
// UNAVAILABLE in well under a second, and a busy but healthy Redis answers far inside it.
const DefaultTimeout = 400 * time.Millisecond

// UnsetTimeout is what Open uses when Config.Timeout is zero: DefaultTimeout, unless a test
// binary on a machine shared with other builds raised it for every client it starts
// (pkg/redistest.Main does). A program sets Config.Timeout instead.
var UnsetTimeout = DefaultTimeout

const (
	// DefaultClusterRefresh is Config.ClusterRefresh's default: one CLUSTER SLOTS a second per
	// client, and a failover is seen about a second after it happens.
	DefaultClusterRefresh = time.Second
)

// timeouts returns cfg with Timeout and ClusterRefresh defaulted.
func (cfg Config) timeouts() Config {
	if cfg.Timeout <= 0 {
		cfg.Timeout = UnsetTimeout
	}
	if cfg.ClusterRefresh <= 0 {
		cfg.ClusterRefresh = DefaultClusterRefresh
	}
	return cfg
}

// ParseClusterAddrs splits a comma-separated list of host:port seeds, dropping blanks.
func ParseClusterAddrs(s string) []string {
	var out []string
	for _, a := range strings.Split(s, ",") {
		if a = strings.TrimSpace(a); a != "" {
			out = append(out, a)
		}
	}
	return out
}

// Open connects to the configured Redis, checks it answers PING and that it can keep the
// promise cfg.Durability makes (see checkDurability); a Redis that cannot is refused with a
// sentence naming the fix.
func Open(ctx context.Context, cfg Config) (redis.UniversalClient, error) {
	var c redis.UniversalClient
	cfg = cfg.timeouts()
	durability, err := ParseDurability(string(cfg.Durability))
	if err != nil {
		return nil, err
	}
	cfg.Durability = durability
	password, err := cfg.password()
	if err != nil {
		return nil, err
	}
	cfg.Password = password
	pol := &policy{wait: cfg.Timeout / 2}
	switch {
	case len(cfg.ClusterAddrs) > 0:
		tc, err := cfg.TLS.tlsConfig(nil)
		if err != nil {
			return nil, err
		}
		cc := redis.NewClusterClient(&redis.ClusterOptions{
			Addrs:                      cfg.ClusterAddrs,
			Password:                   cfg.Password,
			PoolSize:                   cfg.PoolSize,
			TLSConfig:                  tc,
			DialTimeout:                cfg.Timeout,
			ReadTimeout:                cfg.Timeout,
			WriteTimeout:               cfg.Timeout,
			PoolTimeout:                cfg.Timeout,
			MaxRetries:                 -1, // redirects after a failover still follow MOVED
			ClusterStateReloadInterval: cfg.ClusterRefresh,
		})
		// Each node's client gets the hook, so that a node's writes are confirmed on that
		// node: one barrier and WAIT per master that took writes, shared by its writers.
		pol.cluster = true
		cc.OnNewNode(func(n *redis.Client) { n.AddHook(&durabilityHook{client: n, p: pol}) })
		c = cc
	case len(cfg.SentinelAddrs) > 0 || IsSentinelURL(cfg.URL):
		opt, err := cfg.failoverOptions()
		if err != nil {
			return nil, err
		}
		c = redis.NewFailoverClient(opt)
	case cfg.URL != "":
		opt, err := redis.ParseURL(cfg.URL)
		if err != nil {
			return nil, fmt.Errorf("redis url: %s", redactURL(err.Error(), cfg.URL))
		}
		if cfg.PoolSize > 0 {
			opt.PoolSize = cfg.PoolSize
		}
		if opt.Password == "" {
			opt.Password = cfg.Password
		}
		if opt.TLSConfig, err = cfg.TLS.tlsConfig(opt.TLSConfig); err != nil {
			return nil, err
		}
		if opt.DialTimeout == 0 {
			opt.DialTimeout = cfg.Timeout
		}
		if opt.ReadTimeout == 0 {
			opt.ReadTimeout = cfg.Timeout
		}
		if opt.WriteTimeout == 0 {
			opt.WriteTimeout = cfg.Timeout
		}
		if opt.PoolTimeout == 0 {
			opt.PoolTimeout = cfg.Timeout
		}
		if opt.MaxRetries == 0 {
			opt.MaxRetries = -1
		}
		if opt.ReadTimeout > 0 {
			pol.wait = opt.ReadTimeout / 2
		}
		c = redis.NewClient(opt)
	default:
		return nil, errors.New("redis: set a URL, Sentinel addresses or cluster addresses")
	}
	seconds, err := scriptHistogram(cfg.Metrics)
	if err != nil {
		_ = c.Close()
		return nil, err
	}
	c.AddHook(observeHook{seconds: seconds})
	if one, ok := c.(*redis.Client); ok {
		one.AddHook(&durabilityHook{client: one, p: pol})
	}
	if err := c.Ping(ctx).Err(); err != nil {
		_ = c.Close()
		return nil, fmt.Errorf("redis ping: %w", err)
	}
	if err := checkDurability(ctx, c, cfg, pol); err != nil {
		_ = c.Close()
		return nil, err
	}
	return c, nil
}

// Script is a Lua script run by its SHA, loaded on demand.
type Script struct {
	name string
	src  string
	s    *redis.Script
}

// NewScript wraps Lua source under a name (its file name, "create.lua"), which labels its
// latency metric and its trace spans. Construct scripts once, at store construction.
func NewScript(name, src string) *Script {
	s := &Script{name: name, src: src, s: redis.NewScript(src)}
	scriptNames.Store(s.s.Hash(), name)
	return s
}

// Name is the name the script was made with.
func (s *Script) Name() string { return s.name }

// Run evaluates the script by SHA and falls back to sending its source on NOSCRIPT.
func (s *Script) Run(ctx context.Context, c redis.Scripter, keys []string, args ...any) *redis.Cmd {
	return s.s.Run(ctx, c, keys, args...)
}

// Queue adds an EVALSHA of the script to a pipeline. A pipeline cannot fall back on NOSCRIPT,
// so pipelines run through Pipelined, which loads the scripts and retries once.
func (s *Script) Queue(ctx context.Context, p redis.Pipeliner, keys []string, args ...any) *redis.Cmd {
	return s.s.EvalSha(ctx, p, keys, args...)
}

// QueueSource adds an EVAL of the script's source to a pipeline: it cannot fail with NOSCRIPT,
// and it leaves the script loaded on the node that ran it. Pipelines use it to re-send the
// calls that met NOSCRIPT, so that a second flush or restart between loading the scripts and
// re-sending cannot fail them again.
func (s *Script) QueueSource(ctx context.Context, p redis.Pipeliner, keys []string, args ...any) *redis.Cmd {
	return s.s.Eval(ctx, p, keys, args...)
}

// Load loads the script on every node (every master of a cluster).
func (s *Script) Load(ctx context.Context, c redis.UniversalClient) error {
	if cc, ok := c.(*redis.ClusterClient); ok {
		return cc.ForEachShard(ctx, func(ctx context.Context, n *redis.Client) error {
			return s.s.Load(ctx, n).Err()
		})
	}
	return s.s.Load(ctx, c).Err()
}

// IsNoScript reports whether err is Redis saying the script is not loaded.
func IsNoScript(err error) bool {
	return err != nil && strings.HasPrefix(err.Error(), "NOSCRIPT")
}

// Pipelined runs fill in a pipeline and executes it. Commands that failed with NOSCRIPT (Redis
// restarted, a new cluster node, or a cluster node that never ran the script) are sent again,
// alone, as EVALs of their source (which cannot meet NOSCRIPT), after the scripts are loaded
// for the pipelines that follow; their results land in the commands fill queued. Only those
// are re-sent: on a cluster, the rest of the pipeline already ran on other nodes, and running
// a script twice would lose its first answer (whether it changed anything).
func Pipelined(ctx context.Context, c redis.UniversalClient, scripts []*Script, fill func(p redis.Pipeliner)) ([]redis.Cmder, error) {
	cmds, err := c.Pipelined(ctx, func(p redis.Pipeliner) error { fill(p); return nil })
	if !anyNoScript(cmds) {
		return cmds, pipelineErr(err)
	}
	bySHA := make(map[string]*Script, len(scripts))
	for _, s := range scripts {
		if err := s.Load(ctx, c); err != nil {
			return nil, err
		}
		bySHA[s.s.Hash()] = s
	}
	var failed []*redis.Cmd
	var again []*redis.Cmd
	_, _ = c.Pipelined(ctx, func(p redis.Pipeliner) error {
		for _, cmd := range cmds {
			orig, ok := cmd.(*redis.Cmd)
			if !ok || !IsNoScript(orig.Err()) {
				continue
			}
			failed = append(failed, orig)
			args := orig.Args()
			if sha, _ := args[1].(string); bySHA[sha] != nil && len(args) >= 3 {
				// EVALSHA sha numkeys key... arg... becomes EVAL source numkeys key... arg...
				evalArgs := append([]any{"eval", bySHA[sha].src}, args[2:]...)
				again = append(again, p.Do(ctx, evalArgs...))
			} else {
				again = append(again, p.Do(ctx, args...))
			}
		}
		return nil
	})
	for i, orig := range failed {
		orig.SetVal(again[i].Val())
		orig.SetErr(again[i].Err())
	}
	err = nil
	for _, cmd := range cmds {
		if cerr := cmd.Err(); cerr != nil && !errors.Is(cerr, redis.Nil) {
			err = cerr
			break
		}
	}
	return cmds, err
}

func anyNoScript(cmds []redis.Cmder) bool {
	for _, c := range cmds {
		if IsNoScript(c.Err()) {
			return true
		}
	}
	return false
}

// pipelineErr drops redis.Nil: a script that returns nil is an answer, not a failure.
func pipelineErr(err error) error {
	if errors.Is(err, redis.Nil) {
		return nil
	}
	return err
}
