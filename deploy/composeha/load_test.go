//go:build composeha

package composeha

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"sort"
	"sync"
	"sync/atomic"
	"time"
)

// The domains the load writes to, in the order the report prints them.
var domains = []string{"locks", "chat", "reservations", "lobby"}

// domainLoad is what the clients of one domain saw.
type domainLoad struct {
	mu       sync.Mutex
	acked    int         // writes answered as done
	unknown  int         // writes answered 503 or not at all before their outcome was learned
	answered []time.Time // when each call the domain answered (any status below 500) ended
}

func (d *domainLoad) answer(c restCall) {
	if c.answered() {
		d.mu.Lock()
		d.answered = append(d.answered, c.end)
		d.mu.Unlock()
	}
}

func (d *domainLoad) add(acked, unknown int) {
	d.mu.Lock()
	d.acked += acked
	d.unknown += unknown
	d.mu.Unlock()
}

// counts is the domain's acknowledged and unknown writes so far.
func (d *domainLoad) counts() (int, int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.acked, d.unknown
}

// longestGap is the longest time within [from, to] between two answers of the domain (or
// between from or to and the nearest answer).
func (d *domainLoad) longestGap(from, to time.Time) time.Duration {
	d.mu.Lock()
	ends := append([]time.Time(nil), d.answered...)
	d.mu.Unlock()
	sort.Slice(ends, func(i, j int) bool { return ends[i].Before(ends[j]) })
	var longest time.Duration
	prev := from
	for _, e := range ends {
		if e.Before(from) {
			continue
		}
		if e.After(to) {
			break
		}
		longest = max(longest, e.Sub(prev))
		prev = e
	}
	return max(longest, to.Sub(prev))
}

// grant is one acknowledged lock hold.
type grant struct {
	lock, owner  string
	token        int64
	firstStart   time.Time // the first acquire attempt of the hold began (it may have been granted then)
	end          time.Time // its acquire was answered
	expiresAt    time.Time
	releaseStart time.Time // the first release attempt began (zero: never released)
}

// post is one acknowledged chat post.
type post struct {
	room, postID string
	id           int64
}

// hold is one reservation the clients created.
type hold struct {
	id        string
	confirmed bool // the confirm was acknowledged too
}

// load is the REST clients and what they were told.
type load struct {
	s    *stack
	stop atomic.Bool
	wg   sync.WaitGroup
	dom  map[string]*domainLoad

	mu     sync.Mutex
	grants []grant
	posts  []post
	holds  []hold
	rooms  []string // lobby room codes
}

// A chat room keeps its last 1000 messages (the chat service's HistoryKeep): each poster moves
// to another room after postsPerRoom, so every acknowledged post can be read back.
const postsPerRoom = 500

// The locks the lockers contend for.
var lockNames = []string{"ha-lock-a", "ha-lock-b"}

func newLoad(s *stack) *load {
	l := &load{s: s, dom: map[string]*domainLoad{}}
	for _, d := range domains {
		l.dom[d] = &domainLoad{}
	}
	return l
}

// start runs the clients until finish: four lockers on two locks, three chat posters, three
// reservation holders and one lobby room creator, each pausing 50 ms between operations.
func (l *load) start(ctx context.Context) {
	run := func(f func(ctx context.Context, w, n int)) func(w int) {
		return func(w int) {
			defer l.wg.Done()
			for n := 0; !l.stop.Load() && ctx.Err() == nil; n++ {
				f(ctx, w, n)
				select {
				case <-ctx.Done():
				case <-time.After(50 * time.Millisecond):
				}
			}
		}
	}
	for _, c := range []struct {
		workers int
		f       func(ctx context.Context, w, n int)
	}{{4, l.lockOnce}, {3, l.postOnce}, {3, l.holdOnce}, {1, l.roomOnce}} {
		for w := range c.workers {
			l.wg.Add(1)
			go run(c.f)(w)
		}
	}
}

// finish lets every client end its operation (repeating an unknown outcome until it is
// learned) and waits for them.
func (l *load) finish() {
	l.stop.Store(true)
	l.wg.Wait()
}

// repeat makes a call until the domain answers it, for at most 50 s (a chat postId is
// remembered for a minute). It returns the answer (code 0 or 5xx if none came) and whether
// the first attempt went unanswered (the outcome was unknown for a while).
func (l *load) repeat(ctx context.Context, domain string, mk func() restCall) (restCall, bool) {
	d := l.dom[domain]
	first := time.Now()
	unknown := false
	for {
		c := mk()
		d.answer(c)
		if c.answered() || ctx.Err() != nil || time.Since(first) > 50*time.Second {
			return c, unknown
		}
		unknown = true
		select {
		case <-ctx.Done():
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// lockOnce acquires a contended lock as a new owner (waiting up to 1 s in line), holds it
// 20 ms and releases it by its fencing token; every unknown outcome is repeated with the same
// owner or token, as docs/API.md says.
func (l *load) lockOnce(ctx context.Context, w, n int) {
	lock := lockNames[(w+n)%len(lockNames)]
	owner := fmt.Sprintf("w%d-%d", w, n)
	body, _ := json.Marshal(map[string]any{"owner": owner, "ttlMs": 3000, "waitMs": 1000})
	first := time.Now()
	c, unknown := l.repeat(ctx, "locks", func() restCall {
		return l.s.call(ctx, "POST", "/locks/"+lock+"/acquire", string(body), 1000)
	})
	d := l.dom["locks"]
	var got struct {
		Acquired     bool  `json:"acquired"`
		FencingToken int64 `json:"fencingToken"`
		ExpiresAt    int64 `json:"expiresAt"`
	}
	if c.code != 200 || json.Unmarshal(c.body, &got) != nil {
		d.add(0, b2i(unknown))
		return
	}
	if !got.Acquired {
		d.add(0, b2i(unknown))
		return
	}
	d.add(1, b2i(unknown))
	g := grant{lock: lock, owner: owner, token: got.FencingToken, firstStart: first, end: c.end, expiresAt: time.UnixMilli(got.ExpiresAt)}
	select {
	case <-ctx.Done():
	case <-time.After(20 * time.Millisecond):
	}
	g.releaseStart = time.Now()
	rel, _ := json.Marshal(map[string]any{"owner": owner, "fencingToken": got.FencingToken})
	r, runknown := l.repeat(ctx, "locks", func() restCall {
		return l.s.call(ctx, "POST", "/locks/"+lock+"/release", string(rel), 0)
	})
	if r.code == 200 {
		d.add(1, b2i(runknown))
	} else {
		d.add(0, b2i(runknown))
	}
	l.mu.Lock()
	l.grants = append(l.grants, g)
	l.mu.Unlock()
}

// postOnce posts a chat message whose body is its postId, repeated with the same postId until
// it is answered.
func (l *load) postOnce(ctx context.Context, w, n int) {
	id := fmt.Sprintf("p%d-%d", w, n)
	room := fmt.Sprintf("ha-chat-%d-%d", w, n/postsPerRoom)
	body, _ := json.Marshal(map[string]string{"userId": fmt.Sprintf("poster-%d", w), "username": "poster", "body": id, "postId": id})
	c, unknown := l.repeat(ctx, "chat", func() restCall {
		return l.s.call(ctx, "POST", "/chat/rooms/"+room+"/messages", string(body), 0)
	})
	var m struct {
		ID int64 `json:"id"`
	}
	if c.code != 201 || json.Unmarshal(c.body, &m) != nil {
		l.dom["chat"].add(0, b2i(unknown))
		return
	}
	l.dom["chat"].add(1, b2i(unknown))
	l.mu.Lock()
	l.posts = append(l.posts, post{room: room, postID: id, id: m.ID})
	l.mu.Unlock()
}

// holdOnce creates a reservation and confirms it, repeating either while its outcome is unknown.
func (l *load) holdOnce(ctx context.Context, w, n int) {
	id := fmt.Sprintf("ha-%d-%d", w, n)
	d := l.dom["reservations"]
	// A create is repeated as it is (no confirm can have come between: a reset changes
	// nothing); one left unanswered for 50 s is read before it counts as not created.
	c, unknown := l.repeat(ctx, "reservations", func() restCall {
		return l.s.call(ctx, "POST", "/reservations/"+id, `{"ttlSeconds": 3600}`, 0)
	})
	created := c.code == 201
	if !c.answered() {
		st := l.status(ctx, id)
		created = st == "held" || st == "confirmed"
	}
	if !created {
		d.add(0, b2i(unknown))
		return
	}
	d.add(1, b2i(unknown))
	h := hold{id: id}
	c, u := l.repeat(ctx, "reservations", func() restCall {
		return l.s.call(ctx, "POST", "/reservations/"+id+"/confirm", `{}`, 0)
	})
	h.confirmed = c.code == 200
	d.add(b2i(h.confirmed), b2i(u))
	l.mu.Lock()
	l.holds = append(l.holds, h)
	l.mu.Unlock()
}

// status reads a reservation's status, repeating while the domain does not answer ("" if it
// never did).
func (l *load) status(ctx context.Context, id string) string {
	c, _ := l.repeat(ctx, "reservations", func() restCall {
		return l.s.call(ctx, "GET", "/reservations/"+id, "", 0)
	})
	var r struct {
		Status string `json:"status"`
	}
	if c.code != 200 || json.Unmarshal(c.body, &r) != nil {
		return ""
	}
	return r.Status
}

// roomOnce creates a lobby room. An unknown outcome is not repeated (a repeat makes a second
// room): it stays unknown.
func (l *load) roomOnce(ctx context.Context, w, n int) {
	name := fmt.Sprintf("ha room %d %d", w, n)
	c := l.s.call(ctx, "POST", "/lobby/rooms", `{"name": "`+name+`", "video": {"title": "routine", "durationMs": 3600000}}`, 0)
	d := l.dom["lobby"]
	d.answer(c)
	var r struct {
		Code string `json:"code"`
	}
	if c.code != 201 || json.Unmarshal(c.body, &r) != nil {
		d.add(0, b2i(!c.answered()))
		return
	}
	d.add(1, 0)
	l.mu.Lock()
	l.rooms = append(l.rooms, r.Code)
	l.mu.Unlock()
	select {
	case <-ctx.Done():
	case <-time.After(200 * time.Millisecond):
	}
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// lost reads back everything acknowledged and returns, per domain, what is missing (with an
// example each).
func (l *load) lost(ctx context.Context) (map[string]int, []string) {
	lost := map[string]int{}
	var why []string
	miss := func(domain, format string, args ...any) {
		lost[domain]++
		if lost[domain] <= 3 {
			why = append(why, domain+": "+fmt.Sprintf(format, args...))
		}
	}
	get := func(domain, path string) restCall {
		c, _ := l.repeat(ctx, domain, func() restCall { return l.s.call(ctx, "GET", path, "", 0) })
		return c
	}

	// Chat: every acknowledged post, once, under the id it was acknowledged with.
	stored := map[string][]int64{} // room and body -> ids
	read := map[string]bool{}
	for _, p := range l.posts {
		if read[p.room] {
			continue
		}
		read[p.room] = true
		c := get("chat", fmt.Sprintf("/chat/rooms/%s/messages?since=0&limit=1000", p.room))
		var page struct {
			Messages []struct {
				ID   int64  `json:"id"`
				Body string `json:"body"`
			} `json:"messages"`
		}
		if c.code != 200 || json.Unmarshal(c.body, &page) != nil {
			miss("chat", "history of %s: HTTP %d %s", p.room, c.code, c.body)
			continue
		}
		for _, m := range page.Messages {
			stored[p.room+" "+m.Body] = append(stored[p.room+" "+m.Body], m.ID)
		}
	}
	for _, p := range l.posts {
		if ids := stored[p.room+" "+p.postID]; len(ids) != 1 || ids[0] != p.id {
			miss("chat", "post %s to %s acknowledged as id %d, stored as %v", p.postID, p.room, p.id, ids)
		}
	}

	// Reservations: every acknowledged create held or confirmed, every acknowledged confirm confirmed.
	for _, h := range l.holds {
		c := get("reservations", "/reservations/"+h.id)
		var r struct {
			Status string `json:"status"`
		}
		_ = json.Unmarshal(c.body, &r)
		if (h.confirmed && r.Status != "confirmed") || (r.Status != "held" && r.Status != "confirmed") {
			miss("reservations", "%s (confirm acknowledged: %v) reads HTTP %d %q", h.id, h.confirmed, c.code, r.Status)
		}
	}

	// Lobby: every acknowledged room is there.
	for _, code := range l.rooms {
		if c := get("lobby", "/lobby/rooms/"+url.PathEscape(code)); c.code != 200 {
			miss("lobby", "room %s reads HTTP %d %s", code, c.code, c.body)
		}
	}

	// Locks: an acknowledged hold is lost when another owner was granted the lock after it was
	// acknowledged, while it certainly still lasted (before its lease's end and its release).
	byLock := map[string][]grant{}
	for _, g := range l.grants {
		byLock[g.lock] = append(byLock[g.lock], g)
	}
	for _, gs := range byLock {
		for _, a := range gs {
			until := a.expiresAt.Add(-50 * time.Millisecond)
			if !a.releaseStart.IsZero() && a.releaseStart.Before(until) {
				until = a.releaseStart
			}
			for _, b := range gs {
				if b.owner != a.owner && b.firstStart.After(a.end) && b.end.Before(until) {
					miss("locks", "%s: %s's hold (token %d) acknowledged at %s, yet %s got token %d at %s",
						a.lock, a.owner, a.token, a.end.Format("15:04:05.000"), b.owner, b.token, b.end.Format("15:04:05.000"))
					break
				}
			}
		}
	}
	return lost, why
}

// tokenViolations checks that every lock's fencing tokens grew: a hold whose first acquire
// began after another hold was acknowledged has a greater token. It returns how many holds
// broke that and examples.
func (l *load) tokenViolations() (int, []string) {
	byLock := map[string][]grant{}
	for _, g := range l.grants {
		byLock[g.lock] = append(byLock[g.lock], g)
	}
	bad := 0
	var why []string
	for lock, gs := range byLock {
		sort.Slice(gs, func(i, j int) bool { return gs[i].end.Before(gs[j].end) })
		// best[i] is the greatest token among gs[:i+1], and whose.
		best := make([]int, len(gs))
		for i := range gs {
			best[i] = i
			if i > 0 && gs[best[i-1]].token > gs[i].token {
				best[i] = best[i-1]
			}
		}
		for _, b := range gs {
			k := sort.Search(len(gs), func(i int) bool { return !gs[i].end.Before(b.firstStart) }) - 1
			if k < 0 {
				continue
			}
			if a := gs[best[k]]; a.token >= b.token {
				bad++
				if len(why) < 3 {
					why = append(why, fmt.Sprintf("%s: %s got token %d after %s's %d was acknowledged", lock, b.owner, b.token, a.owner, a.token))
				}
			}
		}
	}
	return bad, why
}

// answeredSince is how many of the domain's calls were answered after t.
func (d *domainLoad) answeredSince(t time.Time) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	n := 0
	for _, e := range d.answered {
		if e.After(t) {
			n++
		}
	}
	return n
}
