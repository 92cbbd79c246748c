//go:build composepause

package composepause

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vigil-dev/vigil/pkg/wait"
)

// moveBound is issue 25's bound on a room's or chat room's upstream moving to another replica,
// and on a REST call past its waitMs.
const moveBound = 10 * time.Second

// The metrics ports and the stream each service's busiest replica is found by.
const (
	roomMetrics, roomStream   = 9005, "Attach"
	chatMetrics, chatStream   = 9003, "Connect"
	locksMetrics, locksStream = 9002, "Session"
)

// TestComposePause runs the stack scaled to two replicas each of room, chat and locks and
// pauses the serving one of each; then scales to one each and pauses those for 30 s.
func TestComposePause(t *testing.T) {
	s := newStack(t)
	start := time.Now()
	t.Logf("load average at the start: %s", loadavg())
	t.Run("two replicas, the serving one paused", func(t *testing.T) { pauseServing(t, s) })
	t.Run("one replica, paused 30 s", func(t *testing.T) { pauseOnly(t, s) })
	t.Logf("whole run %.0f s, load average at the end: %s", time.Since(start).Seconds(), loadavg())
}

// calls collects REST calls from many goroutines.
type calls struct {
	mu  sync.Mutex
	all []restCall
}

func (c *calls) add(r restCall) {
	c.mu.Lock()
	c.all = append(c.all, r)
	c.mu.Unlock()
}

func (c *calls) list() []restCall {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]restCall(nil), c.all...)
}

// longestUnavailable is the longest stretch in which REST calls failed: from the start of a
// failed call to the end of the last failed call before the next success started.
func longestUnavailable(cs []restCall) time.Duration {
	sort.Slice(cs, func(i, j int) bool { return cs[i].start.Before(cs[j].start) })
	var longest time.Duration
	var from, to time.Time
	for _, c := range cs {
		if c.code == 200 {
			if !from.IsZero() {
				longest = max(longest, to.Sub(from))
				from = time.Time{}
			}
			continue
		}
		if from.IsZero() {
			from = c.start
		}
		if c.end.After(to) {
			to = c.end
		}
	}
	if !from.IsZero() {
		longest = max(longest, to.Sub(from))
	}
	return longest
}

// untilTime blocks until t (an observation window's end, not a condition).
func untilTime(t time.Time) {
	if d := time.Until(t); d > 0 {
		<-time.After(d)
	}
}

// pauseAll pauses the replicas' containers and returns the unpause, which the test's cleanup
// also runs (once at most) so a failed test leaves nothing paused.
func pauseAll(t *testing.T, paused []replica) (unpause func()) {
	t.Helper()
	for _, p := range paused {
		if out, err := docker("pause", p.id); err != nil {
			t.Fatalf("docker pause %s: %v %s", p.name, err, out)
		}
	}
	var once sync.Once
	unpause = func() {
		once.Do(func() {
			for _, p := range paused {
				if out, err := docker("unpause", p.id); err != nil {
					t.Errorf("docker unpause %s: %v %s", p.name, err, out)
				}
			}
		})
	}
	t.Cleanup(unpause)
	return unpause
}

// every runs f every period from now until the deadline (or ctx's end), with a counter.
func every(ctx context.Context, period time.Duration, until time.Time, f func(k int)) {
	tick := time.NewTicker(period)
	defer tick.Stop()
	for k := 1; time.Now().Before(until) && ctx.Err() == nil; k++ {
		f(k)
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// lockAnswer is a lock acquire's answer.
type lockAnswer struct {
	Acquired     bool    `json:"acquired"`
	FencingToken float64 `json:"fencingToken"`
	Owner        string  `json:"owner"`
	Held         bool    `json:"held"`
}

func decodeLock(c restCall) lockAnswer {
	var a lockAnswer
	_ = json.Unmarshal(c.body, &a)
	return a
}

// warm scales the room, chat and locks services to replicas, opens a practice room with its
// leader and viewers and a chat room with members, both named after prefix and a suffix of
// this run, and waits until the lobby counts every viewer, every viewer has the leader's first
// sync and every member the first message.
func (s *stack) warm(ctx context.Context, t *testing.T, replicas int, prefix string, viewers, members int) (suffix string, r *roomClients, chatRoom string, chat []*sock) {
	t.Helper()
	s.up(replicas)
	suffix = strconv.FormatInt(time.Now().UnixNano()%1e12, 36)
	r = s.openRoom(ctx, t, prefix+" "+suffix, viewers)
	chatRoom = prefix + "-" + suffix
	chat = s.chatMembers(ctx, t, chatRoom, members)
	wait.For(t, "the lobby counting every viewer", func() error {
		if n, c := s.viewerCount(ctx, r.code); n != viewers {
			return fmt.Errorf("viewers %d (HTTP %d)", n, c.code)
		}
		return nil
	})
	if err := r.sync(ctx, 1000); err != nil {
		t.Fatal(err)
	}
	wait.For(t, "every viewer told the first sync", func() error { return allAt(r.viewers, 1000) })
	if c, _ := s.post(ctx, chatRoom, "hello-"+suffix); c.code != 201 {
		t.Fatalf("post: HTTP %d %s", c.code, c.body)
	}
	wait.For(t, "every member got the first message", func() error { return allGot(chat, "hello-"+suffix) })
	return suffix, r, chatRoom, chat
}

func pauseServing(t *testing.T, s *stack) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	const viewers, members = 30, 30
	suffix, r, chatRoom, chat := s.warm(ctx, t, 2, "pause", viewers, members)

	// Locks held through the pause: no one else may get them, before, during or after.
	held := map[string]float64{}
	for k := range 3 {
		name := fmt.Sprintf("held-%s-%d", suffix, k)
		c := s.call(ctx, "POST", "/locks/"+name+"/acquire", `{"owner": "holder", "ttlMs": 600000}`, 0)
		if a := decodeLock(c); c.code != 200 || !a.Acquired {
			t.Fatalf("acquire %s: HTTP %d %s", name, c.code, c.body)
		}
		held[name] = decodeLock(c).FencingToken
	}

	roomRep, roomCounts := s.serving(ctx, "room", roomMetrics, roomStream)
	chatRep, chatCounts := s.serving(ctx, "chat", chatMetrics, chatStream)
	lockRep, lockCounts := s.serving(ctx, "locks", locksMetrics, locksStream)
	t.Logf("open streams: room Attach %s; chat Connect %s; locks Session %s", roomCounts, chatCounts, lockCounts)

	// REST load from 2 s before the pause until 25 s after it; the lobby's count read every
	// 500 ms until the end.
	var rest calls
	var grants sync.Map // lock name -> owner, for every acquire answered acquired
	var secondGrants []string
	var secondMu sync.Mutex
	var bg sync.WaitGroup
	pauseAt := time.Now().Add(2 * time.Second)
	stopLoad := pauseAt.Add(25 * time.Second)
	for w := range 3 {
		bg.Go(func() {
			every(ctx, 250*time.Millisecond, stopLoad, func(k int) {
				name := fmt.Sprintf("free-%s-%d-%d", suffix, w, k)
				owner := fmt.Sprintf("w%d-%d", w, k)
				c := s.call(ctx, "POST", "/locks/"+name+"/acquire", `{"owner": "`+owner+`", "ttlMs": 30000}`, 0)
				c.what = "acquire " + name
				rest.add(c)
				if a := decodeLock(c); c.code == 200 && a.Acquired {
					grants.Store(name, owner)
					rc := s.call(ctx, "POST", "/locks/"+name+"/release", `{"owner": "`+owner+`"}`, 0)
					rc.what = "release " + name
					rest.add(rc)
				}
			})
		})
	}
	bg.Go(func() {
		every(ctx, 500*time.Millisecond, stopLoad, func(k int) {
			name := fmt.Sprintf("held-%s-%d", suffix, k%3)
			c := s.call(ctx, "POST", "/locks/"+name+"/acquire", `{"owner": "other", "ttlMs": 30000, "waitMs": 1000}`, 1000)
			c.what = "acquire (held, waitMs 1000) " + name
			rest.add(c)
			if a := decodeLock(c); c.code == 200 && a.Acquired {
				secondMu.Lock()
				secondGrants = append(secondGrants, name)
				secondMu.Unlock()
			}
		})
	})
	var counts []int
	var countsMu sync.Mutex
	countCtx, stopCounting := context.WithCancel(ctx)
	var counting sync.WaitGroup
	counting.Go(func() {
		every(countCtx, 500*time.Millisecond, time.Now().Add(10*time.Minute), func(int) {
			n, _ := s.viewerCount(ctx, r.code)
			countsMu.Lock()
			counts = append(counts, n)
			countsMu.Unlock()
		})
	})

	untilTime(pauseAt)
	paused := []replica{roomRep, chatRep, lockRep}
	pauseAt = time.Now()
	unpause := pauseAll(t, paused)
	t.Logf("paused %s, %s and %s at %s (load %s)", roomRep.name, chatRep.name, lockRep.name, pauseAt.Format("15:04:05.000"), loadavg())

	// The leader syncs every second, and a message is posted every second (each posted until
	// the gateway answers 201, with the same postId).
	var acked []string
	var ackedMu sync.Mutex
	var firstAck time.Duration
	var syncsSent []int64
	var syncMu sync.Mutex
	bg.Go(func() {
		every(ctx, time.Second, stopLoad, func(k int) {
			pos := int64(100000 + k)
			if r.sync(ctx, pos) == nil {
				syncMu.Lock()
				syncsSent = append(syncsSent, pos)
				syncMu.Unlock()
			}
		})
	})
	bg.Go(func() {
		every(ctx, time.Second, stopLoad, func(k int) {
			body := fmt.Sprintf("during-%s-%d", suffix, k)
			if c, _ := s.post(ctx, chatRoom, body); c.code == 201 {
				ackedMu.Lock()
				if len(acked) == 0 {
					firstAck = time.Since(pauseAt)
				}
				acked = append(acked, body)
				ackedMu.Unlock()
			}
		})
	})

	wait.Within(t, 90*time.Second, "every viewer told the leader's first sync after the pause", func() error { return allAt(r.viewers, 100001) })
	roomMove := time.Since(pauseAt)
	wait.Within(t, 90*time.Second, "a message posted after the pause at every member", func() error {
		ackedMu.Lock()
		defer ackedMu.Unlock()
		if len(acked) == 0 {
			return fmt.Errorf("no post answered 201 yet")
		}
		return allGot(chat, acked[0])
	})
	chatMove := time.Since(pauseAt)
	t.Logf("after the pause: every viewer had the leader's next sync at +%.1f s; every member had the first message posted after it at +%.1f s (that post answered 201 at +%.1f s)",
		roomMove.Seconds(), chatMove.Seconds(), firstAck.Seconds())
	if roomMove > moveBound {
		t.Errorf("the practice room's upstream took %.1f s to move (every viewer told the next sync), want within %v", roomMove.Seconds(), moveBound)
	}
	if chatMove > moveBound {
		t.Errorf("the chat room's first message after the pause reached every member at +%.1f s, want within %v", chatMove.Seconds(), moveBound)
	}

	untilTime(stopLoad)
	bg.Wait() // the load and posts end (the count goes on)
	ackedMu.Lock()
	duringAcked := len(acked)
	ackedMu.Unlock()
	unpause()
	unpausedAt := time.Now()
	t.Logf("unpaused at +%.1f s (load %s)", unpausedAt.Sub(pauseAt).Seconds(), loadavg())

	// After the unpause: more syncs and messages, and the count watched for 12 s.
	every(ctx, time.Second, unpausedAt.Add(5*time.Second), func(k int) {
		pos := int64(200000 + k)
		if err := r.sync(ctx, pos); err != nil {
			t.Errorf("leader sync after the unpause: %v", err)
			return
		}
		syncsSent = append(syncsSent, pos)
		body := fmt.Sprintf("after-%s-%d", suffix, k)
		if c, n := s.post(ctx, chatRoom, body); c.code != 201 {
			t.Errorf("post after the unpause: HTTP %d after %d tries: %s", c.code, n, c.body)
		} else {
			acked = append(acked, body)
		}
	})
	last := syncsSent[len(syncsSent)-1]
	wait.For(t, "every viewer told the last sync", func() error { return allAt(r.viewers, last) })
	wait.For(t, "every message at every member", func() error {
		for _, b := range acked {
			if err := allGot(chat, b); err != nil {
				return err
			}
		}
		return nil
	})
	untilTime(unpausedAt.Add(12 * time.Second))
	stopCounting()
	counting.Wait()

	// Nothing closed, nothing lost, nothing doubled.
	for _, k := range append(r.sockets(), chat...) {
		if err := k.closedErr(); err != nil {
			t.Errorf("a socket closed: %v", err)
		}
	}
	doubled := 0
	for _, v := range r.viewers {
		for _, pos := range syncsSent {
			if n := v.syncCount(pos); n > 1 {
				doubled++
				t.Errorf("%s got the sync at %d %d times", v.name, pos, n)
			}
		}
	}
	for _, m := range chat {
		for _, b := range acked {
			if n := m.got(b); n != 1 {
				t.Errorf("%s got %q %d times, want once", m.name, b, n)
			}
		}
	}
	wrong, unanswered := 0, 0
	for _, n := range counts {
		switch {
		case n < 0:
			unanswered++
		case n != viewers:
			wrong++
		}
	}
	if wrong > 0 {
		t.Errorf("the lobby's viewer count was not %d in %d of %d reads: %v", viewers, wrong, len(counts), counts)
	}
	if unanswered > 0 {
		t.Errorf("the lobby's room went unanswered in %d of %d reads", unanswered, len(counts))
	}

	// REST: no call past its waitMs + 10 s; 20 s after the pause every call succeeds.
	cs := rest.list()
	var longest restCall
	hung, lateFailures, failures := 0, 0, 0
	for _, c := range cs {
		if c.took() > longest.took() {
			longest = c
		}
		if c.took() > c.budget || c.code == 0 {
			hung++
			t.Errorf("%s started at +%.1f s answered HTTP %d after %.1f s, past its waitMs + 10 s", c.what, c.start.Sub(pauseAt).Seconds(), c.code, c.took().Seconds())
		}
		if c.code != 200 {
			failures++
			if c.start.After(pauseAt.Add(20 * time.Second)) {
				lateFailures++
				t.Errorf("%s started %.1f s after the pause answered HTTP %d: %s", c.what, c.start.Sub(pauseAt).Seconds(), c.code, c.body)
			}
		}
	}
	down := longestUnavailable(cs)
	t.Logf("REST: %d calls, %d not 200, %d past waitMs + 10 s, %d failed 20 s after the pause; the longest call %.1f s (%s), the longest time calls failed %.1f s",
		len(cs), failures, hung, lateFailures, longest.took().Seconds(), longest.what, down.Seconds())

	// After the unpause, the resumed replica granted nothing twice.
	secondMu.Lock()
	if len(secondGrants) > 0 {
		t.Errorf("locks held by holder were granted to another owner: %v", secondGrants)
	}
	secondMu.Unlock()
	for name, token := range held {
		c := s.call(ctx, "GET", "/locks/"+url.PathEscape(name), "", 0)
		if a := decodeLock(c); c.code != 200 || !a.Held || a.Owner != "holder" || a.FencingToken != token {
			t.Errorf("%s after the unpause: HTTP %d %s, want held by holder with token %v", name, c.code, c.body, token)
		}
	}
	phantom := 0
	for _, c := range cs {
		if c.code != 200 && strings.HasPrefix(c.what, "acquire free-") {
			name := strings.TrimPrefix(c.what, "acquire ")
			g := s.call(ctx, "GET", "/locks/"+url.PathEscape(name), "", 0)
			if a := decodeLock(g); g.code == 200 && a.Held {
				phantom++
			}
		}
	}
	t.Logf("summary (two replicas): sockets %d open of %d; viewers' next sync +%.1f s; chat +%.1f s; syncs doubled %d; messages %d during the pause, %d in all; lobby reads %d, wrong %d, unanswered %d; REST longest call %.1f s, longest failing %.1f s; acquires answered with an error whose lock was granted anyway (held after the unpause): %d",
		viewers+1+members-closedCount(append(r.sockets(), chat...)), viewers+1+members, roomMove.Seconds(), chatMove.Seconds(), doubled, duringAcked, len(acked),
		len(counts), wrong, unanswered, longest.took().Seconds(), down.Seconds(), phantom)
}

func pauseOnly(t *testing.T, s *stack) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	const viewers, members = 10, 10
	suffix, r, chatRoom, chat := s.warm(ctx, t, 1, "alone", viewers, members)

	var paused []replica
	for _, svc := range []string{"room", "chat", "locks"} {
		paused = append(paused, s.replicas(svc)...)
	}
	pauseAt := time.Now()
	unpause := pauseAll(t, paused)
	t.Logf("paused the only room, chat and locks replicas at %s (load %s)", pauseAt.Format("15:04:05.000"), loadavg())
	if err := r.sync(ctx, 300001); err != nil {
		t.Fatalf("leader sync during the pause: %v", err)
	}

	// REST while paused: a lock acquire and a chat post started every second (each on its own,
	// so they cover the pause), each answered (503 with Retry-After) within 10 s; the lobby's
	// count read every second.
	var rest calls
	var bg sync.WaitGroup
	var counts []int
	var countsMu sync.Mutex
	until := pauseAt.Add(30 * time.Second)
	every(ctx, time.Second, until.Add(-10*time.Second), func(k int) {
		bg.Go(func() {
			c := s.call(ctx, "POST", fmt.Sprintf("/locks/alone-%s-%d/acquire", suffix, k), `{"owner": "o", "ttlMs": 30000}`, 0)
			c.what = "lock acquire"
			rest.add(c)
		})
		bg.Go(func() {
			js := fmt.Sprintf(`{"userId": "poster", "body": "paused-%d", "postId": "paused-%s-%d"}`, k, suffix, k)
			c := s.call(ctx, "POST", "/chat/rooms/"+chatRoom+"/messages", js, 0)
			c.what = "chat post"
			rest.add(c)
		})
		bg.Go(func() {
			n, _ := s.viewerCount(ctx, r.code)
			countsMu.Lock()
			counts = append(counts, n)
			countsMu.Unlock()
		})
	})
	bg.Wait()
	untilTime(until)
	unpause()
	unpausedAt := time.Now()
	t.Logf("unpaused after %.1f s (load %s)", unpausedAt.Sub(pauseAt).Seconds(), loadavg())

	wait.Within(t, 90*time.Second, "every viewer told the sync sent during the pause", func() error { return allAt(r.viewers, 300001) })
	resumedRoom := time.Since(unpausedAt)
	pctx, pcancel := context.WithTimeout(ctx, 90*time.Second)
	c, tries := s.post(pctx, chatRoom, "back-"+suffix)
	pcancel()
	if c.code != 201 {
		t.Fatalf("post after the unpause: HTTP %d after %d tries: %s", c.code, tries, c.body)
	}
	postAck := time.Since(unpausedAt)
	wait.Within(t, 90*time.Second, "a message posted after the unpause at every member", func() error { return allGot(chat, "back-"+suffix) })
	resumedChat := time.Since(unpausedAt)
	wait.For(t, "the lobby counting every viewer", func() error {
		if n, c := s.viewerCount(ctx, r.code); n != viewers {
			return fmt.Errorf("viewers %d (HTTP %d)", n, c.code)
		}
		return nil
	})

	for _, k := range append(r.sockets(), chat...) {
		if err := k.closedErr(); err != nil {
			t.Errorf("a socket closed: %v", err)
		}
	}
	for _, v := range r.viewers {
		if n := v.syncCount(300001); n > 1 {
			t.Errorf("%s got the sync sent during the pause %d times", v.name, n)
		}
	}
	for _, m := range chat {
		if n := m.got("back-" + suffix); n != 1 {
			t.Errorf("%s got the message posted after the unpause %d times, want once", m.name, n)
		}
	}
	var slowest restCall
	answers := map[string]int{}
	for _, c := range rest.list() {
		answers[fmt.Sprintf("%s %d", c.what, c.code)]++
		if c.took() > slowest.took() {
			slowest = c
		}
		if c.code != 503 || c.retryAfter == "" || c.took() > moveBound {
			t.Errorf("%s at +%.1f s: HTTP %d (Retry-After %q) after %.1f s, want 503 with Retry-After within %v: %s",
				c.what, c.start.Sub(pauseAt).Seconds(), c.code, c.retryAfter, c.took().Seconds(), moveBound, c.body)
		}
	}
	countsMu.Lock()
	for _, n := range counts {
		if n != viewers {
			t.Errorf("the lobby's viewer count during the pause: %v, want %d in every read", counts, viewers)
			break
		}
	}
	countsMu.Unlock()
	t.Logf("summary (one replica, paused 30 s): sockets %d open of %d; lobby count during the pause %v; REST answers during the pause %v, the slowest %.1f s; after the unpause every viewer had the held sync at +%.1f s, every member the first new message at +%.1f s (posted 201 at +%.1f s)",
		viewers+1+members-closedCount(append(r.sockets(), chat...)), viewers+1+members, counts, answers, slowest.took().Seconds(), resumedRoom.Seconds(), resumedChat.Seconds(), postAck.Seconds())
}

// allAt reports the first viewer not yet told the playback position pos.
func allAt(ks []*sock, pos int64) error {
	behind := 0
	for _, k := range ks {
		if !k.at(pos) {
			behind++
		}
	}
	if behind > 0 {
		return fmt.Errorf("%d of %d sockets not told %d yet", behind, len(ks), pos)
	}
	return nil
}

// allGot reports the members that have not received body yet.
func allGot(ks []*sock, body string) error {
	missing := 0
	for _, k := range ks {
		if k.got(body) == 0 {
			missing++
		}
	}
	if missing > 0 {
		return fmt.Errorf("%d of %d members lack %q", missing, len(ks), body)
	}
	return nil
}

func closedCount(ks []*sock) int {
	n := 0
	for _, k := range ks {
		if k.closedErr() != nil {
			n++
		}
	}
	return n
}
