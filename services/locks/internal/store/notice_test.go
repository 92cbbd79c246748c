package store

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/vigil-dev/vigil/pkg/redistest"
	"github.com/vigil-dev/vigil/pkg/redisx"
	"github.com/vigil-dev/vigil/pkg/wait"
	"github.com/vigil-dev/vigil/services/locks/internal/domain"
)

// A grant whose notice is lost (here: sent to a channel nobody hears) still reaches the
// waiting call once its subscription is re-established, because every waiting call rechecks.
func TestLostNoticeFoundAfterResubscribe(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	shared, prefix := redistest.Client(t)
	opt, _ := redis.ParseURL(redistest.URL(t))
	opt.ClientName = "locks-" + prefix // names the subscriber connection, to kill it below
	rdb := redis.NewClient(opt)
	defer rdb.Close()
	s := testStore(t, rdb, prefix, Options{})
	listen(t, s)

	got, k := waitBehindHolder(t, ctx, s, shared, "mailbox")
	// Redirect the waiter's notice to a channel nobody listens on.
	entry, _ := shared.LIndex(ctx, k.queue, 0).Result()
	shared.LSet(ctx, k.queue, 0, strings.Replace(entry, s.channel, s.channel+"-lost", 1))
	// Another replica releases, so the grant can only reach the waiter through Redis.
	other := testStore(t, rdb, prefix, Options{Alarms: s.q})
	if ok, err := other.Release(ctx, "mailbox", "holder", 0); err != nil || !ok {
		t.Fatalf("Release(mailbox, holder) = %v, %v", ok, err)
	}
	if l, _ := s.Get(ctx, "mailbox"); l.Owner != "waiter" {
		t.Fatalf("Get(mailbox) after release = %+v, want granted to the waiter", l)
	}
	select {
	case a := <-got:
		t.Fatalf("waiting Acquire answered %+v without a notice", a)
	default:
	}
	// Drop the subscriber's connection; go-redis resubscribes, and the waiter rechecks.
	killSubscriber(t, shared, opt.ClientName)
	select {
	case a := <-got:
		if !a.OK {
			t.Errorf("waiting Acquire after resubscribe = %+v, want acquired", a)
		}
	case <-time.After(wait.Deadline):
		t.Fatalf("waiting Acquire did not find its grant within %v of the resubscribe", wait.Deadline)
	}
}

// waitBehindHolder has "holder" take resource on s and starts "waiter"'s waiting Acquire of it;
// once rdb shows the waiter queued it returns the channel the waiter's answer comes on and the
// resource's keys.
func waitBehindHolder(t *testing.T, ctx context.Context, s *Store, rdb redis.Cmdable, resource string) (<-chan domain.Acquired, lockKeys) {
	t.Helper()
	if a, err := s.Acquire(ctx, resource, "holder", 30*time.Second, 0); err != nil || !a.OK {
		t.Fatalf("Acquire(%s, holder) = %+v, %v", resource, a, err)
	}
	got := make(chan domain.Acquired, 1)
	go func() {
		a, _ := s.Acquire(ctx, resource, "waiter", 30*time.Second, 30*time.Second)
		got <- a
	}()
	k := keysOf(s.q, resource)
	wait.Until(t, "waiter queued", func() bool { n, _ := rdb.LLen(ctx, k.queue).Result(); return n == 1 })
	return got, k
}

func killSubscriber(t *testing.T, c *redis.Client, name string) {
	t.Helper()
	list, err := c.ClientList(context.Background()).Result()
	if err != nil {
		t.Fatal(err)
	}
	killed := 0
	for _, line := range strings.Split(list, "\n") {
		if !strings.Contains(line, " name="+name+" ") || !strings.Contains(line, " cmd=subscribe") && !strings.Contains(line, " sub=1") {
			continue
		}
		var id int64
		if _, err := fmt.Sscanf(line, "id=%d", &id); err == nil {
			if err := c.ClientKillByFilter(context.Background(), "ID", fmt.Sprint(id)).Err(); err == nil {
				killed++
			}
		}
	}
	if killed == 0 {
		t.Fatalf("no subscriber connection named %s in CLIENT LIST", name)
	}
}

// After Redis forgets its scripts, pipelined calls load them and run each call once: a
// release that ran twice would answer false.
func TestPipelinedCallsSurviveScriptFlush(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, _, rdb, _ := newStore(t)
	const n = 40
	for i := range n {
		if a, err := s.Acquire(ctx, fmt.Sprintf("res-%d", i), "o", time.Minute, 0); err != nil || !a.OK {
			t.Fatalf("Acquire(res-%d) = %+v, %v", i, a, err)
		}
	}
	if err := rdb.ScriptFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if ok, err := s.Release(ctx, fmt.Sprintf("res-%d", i), "o", 0); err != nil || !ok {
				t.Errorf("Release(res-%d) after SCRIPT FLUSH = %v, %v; want true", i, ok, err)
			}
		}()
	}
	wg.Wait()
}

// A pipeline whose scripts Redis forgets again between loading them and re-sending the calls
// that met NOSCRIPT still runs each call once.
func TestPipelineSurvivesAFlushAfterItsLoad(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb, prefix := redistest.Client(t)
	// A lock script's reply ends with its grant notices: none here.
	incr := redisx.NewScript("incr.lua", "return {redis.call('INCR', KEYS[1]), {}} -- "+prefix)
	p := &pipeliner{rdb: rdb, scripts: []*redisx.Script{incr}, max: 1, publish: func(context.Context, []string) {}}
	flushes := redistest.ForgetScriptsAfterLoad(t, rdb)
	batch := make([]*scriptCall, 3)
	for i := range batch {
		batch[i] = &scriptCall{sc: incr, keys: []string{fmt.Sprintf("%s:n%d", prefix, i)}, done: make(chan struct{})}
	}
	p.exec(batch)
	if flushes.Load() == 0 {
		t.Fatal("no SCRIPT LOAD was sent: the pipeline did not meet NOSCRIPT")
	}
	for i, c := range batch {
		if c.err != nil || len(c.res) != 1 || c.res[0] != int64(1) {
			t.Errorf("call %d answered %v, %v; want [1], nil", i, c.res, c.err)
		}
		if n := rdb.Get(ctx, fmt.Sprintf("%s:n%d", prefix, i)).Val(); n != "1" {
			t.Errorf("call %d: key = %q after one pipeline, want 1 (err %v)", i, n, c.err)
		}
	}
}

// A release on the waiter's own replica answers the waiter directly, even when the published
// notice goes nowhere.
func TestLocalHandoffSkipsPubSub(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, _, rdb, _ := newStore(t)
	got, _ := waitBehindHolder(t, ctx, s, rdb, "relay")
	// No Listen runs here: only the release's own answer can wake the waiter.
	if ok, _ := s.Release(ctx, "relay", "holder", 0); !ok {
		t.Fatal("Release(relay, holder) = false")
	}
	select {
	case a := <-got:
		if !a.OK || a.Token == 0 {
			t.Errorf("waiting Acquire = %+v, want acquired with a token", a)
		}
	case <-time.After(wait.Deadline):
		t.Fatalf("waiter not answered within %v of a release on its own replica", wait.Deadline)
	}
}
