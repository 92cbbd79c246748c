package grpcdial

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/balancer"
	"google.golang.org/grpc/balancer/base"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/serviceconfig"
	"google.golang.org/grpc/status"
)

// BalancerName is the load balancing policy every Vigil client uses: round robin over the
// READY addresses that passes over one whose unary calls have stopped being answered.
//
// A replica that stops answering without closing anything (a paused container, a partition)
// keeps its connection READY until keepalive notices, up to KeepaliveTime+KeepaliveTimeout
// (15 s), and plain round robin keeps sending it every other call, each of which then waits
// for its deadline. Here an address is passed over, while another READY address is not, for
// as long as a unary call on it has been outstanding longer than StallAfter, and after such a
// call ran out of time (DEADLINE_EXCEEDED), until a call on it is answered or keepalive would
// have noticed (Suspicion); when every address is passed over, calls go round robin as
// before. The sign is soft on purpose: a replica holding a legitimately long call (a lock
// acquire waiting its turn) only takes fewer calls until it answers, and passing it over costs
// nothing while another answers.
const BalancerName = "vigil_round_robin"

// StallAfter is how long a unary call may go unanswered before its address is passed over.
// The service config can set it per connection: {"vigil_round_robin":{"stallAfterMs":N}}.
const StallAfter = time.Second

// Suspicion is how long an address stays passed over after a call on it ran out of time having
// waited longer than StallAfter: as long as keepalive may take to notice a silent peer. A call
// its caller gave up on (CANCELED) says nothing of the address: a REST client that leaves
// while its lock acquire waits its turn.
const Suspicion = KeepaliveTime + KeepaliveTimeout

// serviceConfig is the default service config of DialOptions.
const serviceConfig = `{"loadBalancingConfig":[{"` + BalancerName + `":{}}]}`

func init() { balancer.Register(stallAwareBuilder{}) }

type lbConfig struct {
	serviceconfig.LoadBalancingConfig
	StallAfterMs int64 `json:"stallAfterMs"`
}

type stallAwareBuilder struct{}

func (stallAwareBuilder) Name() string { return BalancerName }

func (stallAwareBuilder) ParseConfig(js json.RawMessage) (serviceconfig.LoadBalancingConfig, error) {
	var c lbConfig
	if err := json.Unmarshal(js, &c); err != nil {
		return nil, fmt.Errorf("%s config: %w", BalancerName, err)
	}
	if c.StallAfterMs < 0 {
		return nil, fmt.Errorf("%s config: stallAfterMs is %d, want 0 (the default, %v) or more", BalancerName, c.StallAfterMs, StallAfter)
	}
	return &c, nil
}

func (stallAwareBuilder) Build(cc balancer.ClientConn, o balancer.BuildOptions) balancer.Balancer {
	pb := &pickerBuilder{calls: map[balancer.SubConn]*inflight{}}
	pb.stallAfter.Store(int64(StallAfter))
	return &stallAware{Balancer: base.NewBalancerBuilder(BalancerName, pb, base.Config{HealthCheck: true}).Build(cc, o), pb: pb}
}

// stallAware is gRPC's base balancer (a connection to every address, a picker over the READY
// ones) with this package's picker, and its config read.
type stallAware struct {
	balancer.Balancer
	pb *pickerBuilder
}

func (b *stallAware) UpdateClientConnState(s balancer.ClientConnState) error {
	if c, ok := s.BalancerConfig.(*lbConfig); ok && c.StallAfterMs > 0 {
		b.pb.stallAfter.Store(int64(time.Duration(c.StallAfterMs) * time.Millisecond))
	}
	return b.Balancer.UpdateClientConnState(s)
}

// pickerBuilder builds a connection's pickers; the unary calls outstanding on each address
// outlive a picker (a new one is built whenever an address changes state).
type pickerBuilder struct {
	stallAfter atomic.Int64 // time.Duration
	mu         sync.Mutex
	calls      map[balancer.SubConn]*inflight
}

func (pb *pickerBuilder) Build(info base.PickerBuildInfo) balancer.Picker {
	if len(info.ReadySCs) == 0 {
		return base.NewErrPicker(balancer.ErrNoSubConnAvailable)
	}
	pb.mu.Lock()
	defer pb.mu.Unlock()
	p := &picker{stallAfter: time.Duration(pb.stallAfter.Load())}
	for sc := range info.ReadySCs {
		in := pb.calls[sc]
		if in == nil {
			in = &inflight{}
			pb.calls[sc] = in
		}
		p.subs = append(p.subs, sub{sc, in})
	}
	// An address no longer READY starts afresh if it comes back: calls still outstanding on
	// it end with their own connection, and finish on the inflight they hold.
	for sc := range pb.calls {
		if _, ok := info.ReadySCs[sc]; !ok {
			delete(pb.calls, sc)
		}
	}
	p.next.Store(rand.Uint32()) // pickers of many clients do not all start on the same address
	return p
}

type sub struct {
	sc balancer.SubConn
	in *inflight
}

type picker struct {
	subs       []sub
	next       atomic.Uint32
	stallAfter time.Duration
}

func (p *picker) Pick(info balancer.PickInfo) (balancer.PickResult, error) {
	n := uint32(len(p.subs))
	start := p.next.Add(1)
	tried, _ := info.Ctx.Value(attemptsKey{}).(*attempts)
	chosen := p.subs[start%n]
	if n > 1 {
		// The first address in round-robin order that is neither stalled nor one an earlier
		// attempt of the call went to; else the first not tried; else the next in turn.
		now := time.Now()
		best := 3
		for i := range n {
			s := p.subs[(start+i)%n]
			rank := 0
			if tried.has(s.sc) {
				rank = 2
			} else if s.in.stalled(now, p.stallAfter) {
				rank = 1
			}
			if rank < best {
				chosen, best = s, rank
			}
			if rank == 0 {
				break
			}
		}
	}
	tried.add(chosen.sc)
	if info.Ctx.Value(unaryKey{}) == nil {
		return balancer.PickResult{SubConn: chosen.sc}, nil // a stream: open as long as it lives
	}
	c := chosen.in.begin(time.Now())
	return balancer.PickResult{SubConn: chosen.sc, Done: func(d balancer.DoneInfo) {
		err := d.Err
		if err == nil && !d.BytesReceived {
			err = errNotSent // the transport was not ready after all: gRPC picks again
		}
		chosen.in.end(c, err, time.Now(), p.stallAfter)
	}}, nil
}

// errNotSent ends a pick whose call was not sent: it neither clears nor starts a suspicion.
var errNotSent = errors.New("not sent")

// inflight is the unary calls outstanding on one address, oldest first, and until when the
// address is suspect.
//
// The calls are a list in the order they were picked, each taken out when it ends: what it
// holds is the calls open now, however many were made and whether or not the picker looks
// (with one address it never does), and the oldest open call is its head.
type inflight struct {
	mu         sync.Mutex
	head, tail *call // oldest, newest
	open       int   // calls in the list
	suspect    time.Time
}

// call is one unary call outstanding on an address.
type call struct {
	at         time.Time // when it was picked
	prev, next *call
	ended      bool
}

func (in *inflight) begin(now time.Time) *call {
	in.mu.Lock()
	defer in.mu.Unlock()
	c := &call{at: now, prev: in.tail}
	if in.tail != nil {
		in.tail.next = c
	} else {
		in.head = c
	}
	in.tail = c
	in.open++
	return c
}

// end ends call c at now: answered (err nil) clears a suspicion; running out of time after
// waiting longer than stallAfter starts one. A call ends once; a second end changes nothing.
func (in *inflight) end(c *call, err error, now time.Time, stallAfter time.Duration) {
	in.mu.Lock()
	defer in.mu.Unlock()
	if c.ended {
		return
	}
	switch {
	case err == nil:
		in.suspect = time.Time{}
	case status.Code(err) == codes.DeadlineExceeded && now.Sub(c.at) > stallAfter:
		in.suspect = now.Add(Suspicion)
	}
	c.ended = true
	if c.prev != nil {
		c.prev.next = c.next
	} else {
		in.head = c.next
	}
	if c.next != nil {
		c.next.prev = c.prev
	} else {
		in.tail = c.prev
	}
	c.prev, c.next = nil, nil
	in.open--
}

// stalled reports whether the address is suspect, or its oldest outstanding call was picked
// longer than d before now.
func (in *inflight) stalled(now time.Time, d time.Duration) bool {
	in.mu.Lock()
	defer in.mu.Unlock()
	if now.Before(in.suspect) {
		return true
	}
	return in.head != nil && now.Sub(in.head.at) > d
}

// unaryKey marks a unary call's context, so that the picker counts it (a stream stays open
// for as long as it lives and says nothing about whether its address answers).
type unaryKey struct{}

func markUnary(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	return invoker(context.WithValue(ctx, unaryKey{}, true), method, req, reply, cc, opts...)
}

// attempts are the addresses the attempts of one call went to (WithAttempts).
type attempts struct {
	mu   sync.Mutex
	used []balancer.SubConn
}

type attemptsKey struct{}

// WithAttempts marks ctx as that of a call sent more than once when an attempt goes
// unanswered (a hedged call): each attempt made with it is sent to an address no earlier one
// went to, while there is one READY.
func WithAttempts(ctx context.Context) context.Context {
	return context.WithValue(ctx, attemptsKey{}, &attempts{})
}

func (a *attempts) has(sc balancer.SubConn) bool {
	if a == nil {
		return false
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Contains(a.used, sc)
}

func (a *attempts) add(sc balancer.SubConn) {
	if a == nil {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.used = append(a.used, sc)
}
