//go:build nemesis

package nemesis

import (
	"cmp"
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	chatv1 "github.com/vigil-dev/vigil/pkg/api/vigil/chat/v1"
	locksv1 "github.com/vigil-dev/vigil/pkg/api/vigil/locks/v1"
	reservationsv1 "github.com/vigil-dev/vigil/pkg/api/vigil/reservations/v1"
)

// callTimeout is every call's deadline: a call on a silent replica fails in this long.
const callTimeout = 3 * time.Second

// outcome is what one fault cost one domain.
type outcome struct {
	ops, lost, doubled, early int
	unavailable               time.Duration // the longest time without a successful operation
}

// workload drives one domain until ctx ends, then checks the history it kept.
type workload interface {
	run(ctx context.Context, conn *grpc.ClientConn, avail *availability)
	check(ctx context.Context, conn *grpc.ClientConn) (outcome, error)
}

// availability keeps the longest gap between successful operations.
type availability struct {
	mu      sync.Mutex
	last    time.Time
	longest time.Duration
}

func (a *availability) start() { a.mu.Lock(); a.last = time.Now(); a.mu.Unlock() }

func (a *availability) ok() {
	a.mu.Lock()
	defer a.mu.Unlock()
	now := time.Now()
	a.longest = max(a.longest, now.Sub(a.last))
	a.last = now
}

func (a *availability) gap() time.Duration {
	a.mu.Lock()
	defer a.mu.Unlock()
	return max(a.longest, time.Since(a.last))
}

// --- locks: no two holds at once, tokens in real-time order, no hold cut short ---

type hold struct {
	resource, owner string
	token           int64
	invoked, got    time.Time // the acquire's call and answer
	releasing       time.Time // the release's call
	released        int       // 1 released, 0 not held any more, -1 unknown (the call failed)
}

type locksWorkload struct {
	name string
	// resources names the locks (name when empty): a run that checks fencing tokens across
	// several faults gives each fault's workload the same.
	resources string
	mu        sync.Mutex
	holds     []hold
	ops       int
}

const lockTTL = 5 * time.Second

func (w *locksWorkload) run(ctx context.Context, conn *grpc.ClientConn, avail *availability) {
	c := locksv1.NewLockServiceClient(conn)
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resource := fmt.Sprintf("%s-r%d", cmp.Or(w.resources, w.name), i%2)
			ttl, wait := lockTTL.Milliseconds(), int64(1000)
			for n := 0; ctx.Err() == nil; n++ {
				// An owner id per hold: a release is by owner, so a release delayed by a paused
				// replica (its client gave up and released elsewhere) would release the same
				// owner's next hold (seen here once in 2,939 holds; docs/OPERATIONS.md).
				owner := fmt.Sprintf("%s-w%d-%d", w.name, i, n)
				h := hold{resource: resource, owner: owner, invoked: time.Now()}
				cctx, cancel := context.WithTimeout(ctx, callTimeout)
				res, err := c.Acquire(cctx, &locksv1.AcquireRequest{Resource: resource, Owner: owner, TtlMs: &ttl, WaitMs: &wait})
				cancel()
				if err != nil || !res.GetAcquired() {
					continue
				}
				h.got, h.token = time.Now(), res.GetFencingToken()
				avail.ok()
				h.releasing = time.Now()
				h.released = -1
				for attempt := 0; attempt < 3 && h.released < 0; attempt++ {
					cctx, cancel := context.WithTimeout(context.Background(), callTimeout)
					rel, err := c.Release(cctx, &locksv1.ReleaseRequest{Resource: resource, Owner: owner})
					cancel()
					switch {
					case err == nil && rel.GetReleased():
						h.released = 1
					case err == nil && attempt == 0:
						h.released = 0
					case err == nil:
						h.released = 1 // an earlier attempt released it and its answer was lost
					}
				}
				w.mu.Lock()
				w.holds = append(w.holds, h)
				w.ops++
				w.mu.Unlock()
			}
		}()
	}
	wg.Wait()
}

func (w *locksWorkload) check(context.Context, *grpc.ClientConn) (outcome, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	o := checkHolds(w.holds, lockTTL)
	o.ops = w.ops
	return o, nil
}

// checkHolds: doubled counts two holds of one resource known to overlap (each from its grant's
// answer to its release's call, the release answering it was still held), a token granted
// twice, and tokens out of real-time order (a grant answered before another's call has the
// larger token); lost counts holds the release found taken before their TTL ran out.
func checkHolds(holds []hold, ttl time.Duration) outcome {
	var o outcome
	by := map[string][]hold{}
	for _, h := range holds {
		by[h.resource] = append(by[h.resource], h)
	}
	for _, hs := range by {
		sort.Slice(hs, func(i, j int) bool { return hs[i].token < hs[j].token })
		for i := range hs {
			if hs[i].released == 0 && hs[i].releasing.Sub(hs[i].invoked) < ttl {
				o.lost++
			}
			if i > 0 && hs[i].token == hs[i-1].token {
				o.doubled++
				continue
			}
			for j := i + 1; j < len(hs); j++ {
				a, b := hs[i], hs[j] // a.token < b.token
				if b.got.Before(a.invoked) {
					o.doubled++ // b's grant was answered before a's was asked, yet a's token is smaller
				}
				if a.released == 1 && b.released == 1 && b.got.Before(a.releasing) && a.got.Before(b.releasing) {
					o.doubled++ // both held at once, by the answers
				}
			}
		}
	}
	return o
}

// --- reservations: each hold expires exactly once, never before its expiresAt ---

type reservationsWorkload struct {
	name string
	// patience bounds how long the check waits for every hold to expire; zero means long
	// enough for an alarm a stopped replica claimed (reservationTTL + 4 alarm leases + 30 s).
	// A run that expects losses (async durability) waits less: a hold whose expiry was lost
	// never expires, however long the check waits.
	patience time.Duration
	mu       sync.Mutex
	ids      []string
	early    int // holds seen expired before their TTL ran out, by the test's clock
}

// reservationTTL is the holds' time to live (the service's minimum).
const reservationTTL = 5 * time.Second

// probe reads hold id half its TTL after it was asked for, by the test's own clock: expired
// already is early, whatever time the replica that expired it wrote down (a replica whose clock
// runs ahead writes a time that looks on time).
func (w *reservationsWorkload) probe(c reservationsv1.ReservationServiceClient, id string, asked time.Time) {
	<-time.After(time.Until(asked.Add(reservationTTL / 2)))
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	res, err := c.GetReservation(ctx, &reservationsv1.GetReservationRequest{ReservationId: id})
	if err == nil && res.GetReservation().GetExpirationCount() > 0 {
		w.mu.Lock()
		w.early++
		w.mu.Unlock()
	}
}

func (w *reservationsWorkload) run(ctx context.Context, conn *grpc.ClientConn, avail *availability) {
	c := reservationsv1.NewReservationServiceClient(conn)
	var probes sync.WaitGroup
	defer probes.Wait()
	paced(ctx, 2, 50*time.Millisecond, func(i, n int) { // pacing: 40 holds a second
		id := fmt.Sprintf("%s-w%d-%d", w.name, i, n)
		asked := time.Now()
		err := upTo3Tries(func(cctx context.Context) error {
			_, err := c.CreateReservation(cctx, &reservationsv1.CreateReservationRequest{ReservationId: id, TtlSeconds: int32(reservationTTL / time.Second)})
			if status.Code(err) == codes.AlreadyExists {
				return nil // an earlier try created it and its answer was lost
			}
			return err
		})
		if err == nil {
			avail.ok()
			w.mu.Lock()
			w.ids = append(w.ids, id)
			w.mu.Unlock()
			probes.Add(1)
			go func() { defer probes.Done(); w.probe(c, id, asked) }()
		}
	})
}

func (w *reservationsWorkload) check(ctx context.Context, conn *grpc.ClientConn) (outcome, error) {
	c := reservationsv1.NewReservationServiceClient(conn)
	w.mu.Lock()
	ids := append([]string(nil), w.ids...)
	o := outcome{ops: len(ids), early: w.early}
	w.mu.Unlock()
	// Every hold's expiry is due 5s after its creation; one a stopped replica had claimed fires
	// on the other after the alarm lease. Read until all expired or the bound passes.
	var rs []*reservationsv1.Reservation
	deadline := time.Now().Add(cmp.Or(w.patience, reservationTTL+4*alarmLease+30*time.Second))
	for {
		rs = rs[:0]
		pending := 0
		o.lost = 0
		for _, id := range ids {
			var res *reservationsv1.GetReservationResponse
			err := readUntilAvailable(ctx, func(cctx context.Context) (err error) {
				res, err = c.GetReservation(cctx, &reservationsv1.GetReservationRequest{ReservationId: id})
				return err
			})
			if status.Code(err) == codes.NotFound {
				o.lost++ // acknowledged, then gone (a store that lost it)
				continue
			}
			if err != nil {
				return o, fmt.Errorf("get %s: %w", id, err)
			}
			r := res.GetReservation()
			rs = append(rs, r)
			if r.GetExpirationCount() == 0 {
				pending++
			}
		}
		if pending == 0 || time.Now().After(deadline) {
			break
		}
		select {
		case <-ctx.Done():
			return o, ctx.Err()
		case <-time.After(time.Second):
		}
	}
	for _, r := range rs {
		switch n := r.GetExpirationCount(); {
		case n == 0:
			o.lost++
		case n > 1:
			o.doubled++
		}
		if r.ExpiredAt != nil && r.GetExpiredAt() < r.GetExpiresAt() {
			o.early++
		}
	}
	return o, nil
}

// --- chat: per room, ids without a gap, no post twice, no acknowledged post lost ---

type chatWorkload struct {
	name  string
	mu    sync.Mutex
	acked map[string]string // post id → room
	ids   map[string]int64  // post id → the message id its acknowledgment handed out
	rooms []string
}

func (w *chatWorkload) run(ctx context.Context, conn *grpc.ClientConn, avail *availability) {
	c := chatv1.NewChatServiceClient(conn)
	w.acked = map[string]string{}
	w.ids = map[string]int64{}
	for i := range 4 {
		w.rooms = append(w.rooms, fmt.Sprintf("%s-room%d", w.name, i))
	}
	paced(ctx, 2, 25*time.Millisecond, func(i, n int) { // pacing: 80 posts a second
		room := w.rooms[n%len(w.rooms)]
		post := fmt.Sprintf("%s-w%d-%d", w.name, i, n)
		var id int64
		err := upTo3Tries(func(cctx context.Context) error {
			res, err := c.PostMessage(cctx, &chatv1.PostMessageRequest{Room: room, UserId: "nemesis", Body: post, PostId: post})
			id = res.GetMessage().GetId()
			return err
		})
		if err == nil {
			avail.ok()
			w.mu.Lock()
			w.acked[post] = room
			w.ids[post] = id
			w.mu.Unlock()
		}
	})
}

// paced runs op(worker, n) in workers goroutines, each once every period (n counts its
// calls), until ctx ends; it returns when every worker has stopped.
func paced(ctx context.Context, workers int, period time.Duration, op func(worker, n int)) {
	var wg sync.WaitGroup
	for i := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tick := time.NewTicker(period)
			defer tick.Stop()
			for n := 0; ; n++ {
				select {
				case <-ctx.Done():
					return
				case <-tick.C:
				}
				op(i, n)
			}
		}()
	}
	wg.Wait()
}

// upTo3Tries makes call up to three times, each with its own callTimeout (not the run's
// context, so a call started before the run ends is answered), until one returns nil; it
// returns the last error.
// readUntilAvailable makes a check's read, each try with callTimeout, again while it answers
// UNAVAILABLE, until ctx ends. A check reads after the heal, while the store may still be
// settling (at load ~52 the new primary went silent past a call's deadline while the killed
// node restarted): a read that fails there is not a loss, and a check that stopped at it would
// report an incomplete count (a reservations check stopped so reported nothing lost under
// async). Any other answer, NotFound included, is returned at once.
func readUntilAvailable(ctx context.Context, read func(context.Context) error) error {
	for {
		cctx, cancel := context.WithTimeout(ctx, callTimeout)
		err := read(cctx)
		cancel()
		if status.Code(err) != codes.Unavailable || ctx.Err() != nil {
			return err
		}
		pause(ctx, 200*time.Millisecond)
	}
}

func upTo3Tries(call func(ctx context.Context) error) error {
	var err error
	for attempt := 0; attempt < 3; attempt++ {
		cctx, cancel := context.WithTimeout(context.Background(), callTimeout)
		err = call(cctx)
		cancel()
		if err == nil {
			return nil
		}
	}
	return err
}

func (w *chatWorkload) check(ctx context.Context, conn *grpc.ClientConn) (outcome, error) {
	c := chatv1.NewChatServiceClient(conn)
	w.mu.Lock()
	defer w.mu.Unlock()
	history := map[string][]*chatv1.ChatMessage{}
	for _, room := range w.rooms {
		var since int64
		for {
			var res *chatv1.ListMessagesResponse
			err := readUntilAvailable(ctx, func(cctx context.Context) (err error) {
				res, err = c.ListMessages(cctx, &chatv1.ListMessagesRequest{Room: room, Limit: 1000, Since: &since})
				return err
			})
			if err != nil {
				return outcome{}, fmt.Errorf("list %s: %w", room, err)
			}
			history[room] = append(history[room], res.GetMessages()...)
			if len(res.GetMessages()) == 0 || since >= res.GetLastId() {
				break
			}
			since = res.GetMessages()[len(res.GetMessages())-1].GetId()
			if since >= res.GetLastId() {
				break
			}
		}
	}
	o := checkChat(history, w.acked, w.ids)
	o.ops = len(w.acked)
	return o, nil
}

// failoverIDFloor: a room's first id under a store primary other than the one that gave its
// last id is at least Redis's TIME in microseconds (docs/CHAT.md), so that no id is handed out
// twice; the gap up to it holds nothing, by design. A gap up to an id this large (2001 in
// microseconds since the epoch) is that jump, not a lost message.
const failoverIDFloor = 1_000_000_000_000_000

// checkChat: lost counts acknowledged posts missing from their room and ids skipped (a gap,
// but for the jump after a failover);
// doubled counts a post stored twice and a message id handed out twice (two messages of a room
// with one id, or two acknowledged posts given the same id: ids reused after a failover).
func checkChat(history map[string][]*chatv1.ChatMessage, acked map[string]string, ids map[string]int64) outcome {
	var o outcome
	seen := map[string]int{}
	for _, msgs := range history {
		for i, m := range msgs {
			seen[m.GetBody()]++
			switch {
			case i == 0:
			case m.GetId() <= msgs[i-1].GetId():
				o.doubled++
			case m.GetId() != msgs[i-1].GetId()+1 && m.GetId() < failoverIDFloor:
				o.lost += int(m.GetId() - msgs[i-1].GetId() - 1)
			}
		}
	}
	handed := map[string]string{} // room/id → the post acknowledged with it
	for post, id := range ids {
		key := fmt.Sprintf("%s/%d", acked[post], id)
		if other, ok := handed[key]; ok && other != post {
			o.doubled++
		}
		handed[key] = post
	}
	for body, n := range seen {
		if n > 1 && strings.Contains(body, "-w") {
			o.doubled += n - 1
		}
	}
	for post := range acked {
		if seen[post] == 0 {
			o.lost++
		}
	}
	return o
}
