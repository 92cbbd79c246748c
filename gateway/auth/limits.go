package auth

// Abuse limits at the edge: a token bucket per API key (or per client address for requests
// without a key) answering 429 with Retry-After, and a quota of rooms created per key. The cap
// on the sockets this gateway holds per room and the per-socket frame rate and size limits
// live in the socket layer (gateway/socket), fed from Limits.

import (
	"fmt"
	"math"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/golang-lru/v2/simplelru"
	"github.com/vigil-dev/vigil/gateway/jsonapi"
	"golang.org/x/time/rate"
)

// Limits bound the HTTP requests one client may make (sockets have their own limits, in the
// socket layer; gRPC message sizes are the backend connections'). Every zero value has the
// default in its comment; a negative value turns that limit off.
type Limits struct {
	// Rate is the requests a second one API key (or, without a key, one client address) may
	// make on average; over it the gateway answers 429 with Retry-After. Default 100 when API
	// keys are configured, off in the development mode (no keys).
	Rate float64
	// Burst is how many requests may come at once. Default 2 × Rate.
	Burst int
	// TrustedProxies are the load balancers whose X-Forwarded-For names the client address.
	// Default none: the peer address is the client.
	TrustedProxies []netip.Prefix
	// RoomsPerHour is how many rooms one key (or address) may create an hour, in a bucket that
	// starts full. Default 30 when API keys are configured, off in the development mode.
	RoomsPerHour float64
}

// WithDefaults fills the zero values; auth says whether API keys are configured.
func (l Limits) WithDefaults(auth bool) Limits {
	if l.Rate == 0 && auth {
		l.Rate = 100
	}
	if l.Burst <= 0 {
		l.Burst = int(math.Max(1, math.Ceil(2*l.Rate)))
	}
	if l.RoomsPerHour == 0 && auth {
		l.RoomsPerHour = 30
	}
	return l
}

// limiterSet is one token bucket per identity, in a least-recently-used list of at most
// maxBuckets: a request costs one map lookup and one list move whatever the number of clients,
// and a flood of new identities pushes out the ones idle longest. A bucket idle long enough to
// have refilled is replaced by a fresh one (the same thing) when its identity comes back.
type limiterSet struct {
	limit  rate.Limit
	burst  int
	refill time.Duration
	now    func() time.Time

	mu      sync.Mutex
	buckets *simplelru.LRU[string, *bucket]
}

type bucket struct {
	l    *rate.Limiter
	seen time.Time
}

const maxBuckets = 100_000

// newLimiterSet makes a set of buckets of perSecond tokens a second, burst deep; nil when
// perSecond is not positive (no limit).
func newLimiterSet(perSecond float64, burst int, now func() time.Time) *limiterSet {
	if perSecond <= 0 {
		return nil
	}
	burst = max(burst, 1)
	buckets, _ := simplelru.NewLRU[string, *bucket](maxBuckets, nil) // only a size <= 0 fails
	return &limiterSet{
		limit: rate.Limit(perSecond), burst: burst, now: now, buckets: buckets,
		refill: time.Duration(float64(burst) / perSecond * float64(time.Second)),
	}
}

// allow takes a token from id's bucket. When there is none it says how long until there is.
func (s *limiterSet) allow(id string) (bool, time.Duration) {
	if s == nil {
		return true, 0
	}
	now := s.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	b, ok := s.buckets.Get(id)
	if !ok || now.Sub(b.seen) > s.refill {
		b = &bucket{l: rate.NewLimiter(s.limit, s.burst)}
		s.buckets.Add(id, b)
	}
	b.seen = now
	if b.l.AllowN(now, 1) {
		return true, 0
	}
	r := b.l.ReserveN(now, 1)
	wait := r.DelayFrom(now)
	r.CancelAt(now)
	return false, wait
}

// clientID is the identity the limits count a client address under: the address itself, or
// for IPv6 its /64, the block one subscriber gets (a client can move within it at will).
func clientID(addr string) string {
	a, err := netip.ParseAddr(addr)
	if err != nil || !a.Is6() || a.Is4In6() {
		return addr
	}
	p, _ := a.Prefix(64)
	return p.String()
}

// tooMany answers 429 with Retry-After in whole seconds (at least 1).
func tooMany(w http.ResponseWriter, wait time.Duration, what string) {
	secs := int(math.Ceil(wait.Seconds()))
	if secs < 1 {
		secs = 1
	}
	w.Header().Set("Retry-After", strconv.Itoa(secs))
	jsonapi.WriteError(w, http.StatusTooManyRequests, fmt.Sprintf("Too many %s; try again in %d s.", what, secs))
}

// clientAddr is the request's client address: the peer, or, when the peer is a trusted proxy,
// the right-most address in X-Forwarded-For that is not a trusted proxy.
func clientAddr(r *http.Request, trusted []netip.Prefix) string {
	peer := r.RemoteAddr
	if host, _, err := net.SplitHostPort(peer); err == nil {
		peer = host
	}
	isTrusted := func(s string) bool {
		a, err := netip.ParseAddr(strings.TrimSpace(s))
		if err != nil {
			return false
		}
		for _, p := range trusted {
			if p.Contains(a.Unmap()) {
				return true
			}
		}
		return false
	}
	if len(trusted) == 0 || !isTrusted(peer) {
		return peer
	}
	hops := strings.Split(strings.Join(r.Header.Values("X-Forwarded-For"), ","), ",")
	for i := len(hops) - 1; i >= 0; i-- {
		h := strings.TrimSpace(hops[i])
		if h != "" && !isTrusted(h) {
			if _, err := netip.ParseAddr(h); err == nil {
				return h
			}
			return peer
		}
	}
	return peer
}
