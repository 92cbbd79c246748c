package redisx_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/vigil-dev/vigil/pkg/redistest"
	"github.com/vigil-dev/vigil/pkg/redisx"
	"github.com/vigil-dev/vigil/pkg/tlstest"
	"github.com/vigil-dev/vigil/pkg/wait"
)

// TestSentinelFailoverFollowed: a client opened on a redis+sentinel:// URL writes to the
// primary; the primary is killed; once the Sentinels promote the replica, the same client
// writes to it, and what it wrote under replica durability before the kill is there. Two
// replicas: the promoted one keeps one, so replica durability can still be kept.
func TestSentinelFailoverFollowed(t *testing.T) {
	t.Parallel()
	s := redistest.StartSentinel(t, redistest.SentinelOptions{Replicas: 2})
	ctx := context.Background()
	rdb, err := redisx.Open(ctx, redisx.Config{URL: s.URL(), Durability: redisx.Replica, Timeout: 2 * time.Second})
	if err != nil {
		t.Fatalf("Open(%s): %v", s.URL(), err)
	}
	defer rdb.Close()
	prefix := redistest.Prefix(t)
	for i := range 20 {
		if err := rdb.Set(ctx, fmt.Sprintf("%s:%d", prefix, i), i, 0).Err(); err != nil {
			t.Fatalf("SET before the failover: %v", err)
		}
	}
	old := s.Primary(t)
	s.Kill(t, old)
	promoted := s.WaitFailover(t, old)
	start := time.Now()
	wait.For(t, "a write through the failover client after the failover", func() error {
		return rdb.Set(ctx, prefix+":after", 1, 0).Err()
	})
	t.Logf("failover %s -> %s; first write through the client %v after the Sentinels named the new primary", old, promoted, time.Since(start))
	for i := range 20 {
		if v, err := rdb.Get(ctx, fmt.Sprintf("%s:%d", prefix, i)).Int(); err != nil || v != i {
			t.Fatalf("GET %s:%d after the failover = %d, %v; want %d (acknowledged under replica durability)", prefix, i, v, err, i)
		}
	}
	if v := s.NodeClient(t, promoted).Get(ctx, prefix+":after").Val(); v != "1" {
		t.Fatalf("the write after the failover is not on the promoted node %s (got %q)", promoted, v)
	}
}

// TestSentinelOverTLSWithPasswords: nodes and Sentinels speak only TLS and each want a password
// (the nodes' and the Sentinels' differ); a rediss+sentinel:// URL with the nodes' password, the
// test CA and the Sentinels' password reaches the primary under replica durability (the start-up
// check reads the Sentinels and the replica with them); without the Sentinels' password, or
// without the CA, Open refuses, quoting neither password.
func TestSentinelOverTLSWithPasswords(t *testing.T) {
	t.Parallel()
	pki := tlstest.New(t)
	const nodePW, sentinelPW = "node-s3cret", "sentinel-s3cret"
	s := redistest.StartSentinel(t, redistest.SentinelOptions{TLS: &pki, Password: nodePW, SentinelPassword: sentinelPW})
	ctx := context.Background()
	good := redisx.Config{URL: s.URL(), SentinelPassword: sentinelPW, TLS: redisx.TLS{CAFile: pki.CA},
		Durability: redisx.Fsync, Timeout: durableTimeout}
	_, err := redisx.Open(ctx, good)
	if err == nil || !strings.Contains(err.Error(), "appendfsync everysec") {
		t.Fatalf("Open(fsync) = %v; want the nodes' settings read over TLS and refused", err)
	}
	good.Durability = redisx.Replica
	rdb, err := redisx.Open(ctx, good)
	if err != nil {
		t.Fatalf("Open(%s) = %v", good.URL, err)
	}
	defer rdb.Close()
	key := redistest.Prefix(t)
	if err := rdb.Set(ctx, key, "v", 0).Err(); err != nil {
		t.Fatalf("SET over TLS under replica durability: %v", err)
	}
	if v := s.NodeClient(t, s.Replicas(t)[0]).Get(ctx, key).Val(); v != "v" {
		t.Fatalf("replica's %s = %q right after the acknowledgment, want v", key, v)
	}
	for name, cfg := range map[string]redisx.Config{
		"without the Sentinels' password": {URL: good.URL, TLS: good.TLS, Timeout: durableTimeout},
		"without the CA":                  {URL: good.URL, SentinelPassword: sentinelPW, Timeout: durableTimeout},
	} {
		c, err := redisx.Open(ctx, cfg)
		if err == nil {
			_ = c.Close()
			t.Errorf("Open(%s) connected, want refused", name)
			continue
		}
		if strings.Contains(err.Error(), nodePW) || strings.Contains(err.Error(), sentinelPW) {
			t.Errorf("Open(%s) = %v quotes a password", name, err)
		}
	}
}

// TestSentinelPausedPrimaryFollowed: the primary is paused past the Sentinels' patience; the
// client follows the promoted replica, and the old primary, resumed, is made a replica, so a
// write through the client is on it too: the client never writes to the demoted node.
func TestSentinelPausedPrimaryFollowed(t *testing.T) {
	t.Parallel()
	s := redistest.StartSentinel(t, redistest.SentinelOptions{Replicas: 2})
	ctx := context.Background()
	rdb, err := redisx.Open(ctx, redisx.Config{URL: s.URL(), Durability: redisx.Replica, Timeout: durableTimeout})
	if err != nil {
		t.Fatalf("Open(%s): %v", s.URL(), err)
	}
	defer rdb.Close()
	prefix := redistest.Prefix(t)
	old := s.Primary(t)
	s.Pause(t, old)
	promoted := s.WaitFailover(t, old)
	wait.For(t, "a write through the failover client after the failover", func() error {
		return rdb.Set(ctx, prefix+":during", 1, 0).Err()
	})
	s.Unpause(t, old)
	demoted := s.NodeClient(t, old)
	wait.Within(t, 60*time.Second, "the old primary made a replica of "+promoted, func() error {
		info, err := demoted.Info(ctx, "replication").Result()
		if err != nil {
			return err
		}
		if !strings.Contains(info, "role:slave") || !strings.Contains(info, "master_link_status:up") {
			return fmt.Errorf("%s is not yet a linked replica", old)
		}
		return nil
	})
	if err := rdb.Set(ctx, prefix+":after", 1, 0).Err(); err != nil {
		t.Fatalf("SET after the old primary came back: %v", err)
	}
	wait.For(t, "the write after the heal on the demoted node", func() error {
		if v := demoted.Get(ctx, prefix+":after").Val(); v != "1" {
			return fmt.Errorf("%s:after on %s = %q", prefix, old, v)
		}
		return nil
	})
}
