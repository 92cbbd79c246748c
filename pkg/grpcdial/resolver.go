package grpcdial

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc/resolver"
)

// minLookupGap bounds how often gRPC's requests to resolve again (sent after each failed
// connection attempt) cause a lookup.
const minLookupGap = time.Second

// lookupTimeout bounds one lookup.
const lookupTimeout = 5 * time.Second

// defaultPort is gRPC's port for a target without one.
const defaultPort = "443"

// lookupFunc resolves a host name to addresses (net.DefaultResolver.LookupHost by default).
type lookupFunc func(ctx context.Context, host string) ([]string, error)

// builder builds resolvers for the dns scheme that look the name up every refresh, unlike
// gRPC's own dns resolver, which looks again only after a connection fails: an address added
// to the name (a replica scaled up) would otherwise never be used while the others answer.
type builder struct {
	refresh time.Duration
	lookup  lookupFunc
}

func newBuilder(refresh time.Duration, lookup lookupFunc) *builder {
	if lookup == nil {
		lookup = net.DefaultResolver.LookupHost
	}
	return &builder{refresh: refresh, lookup: lookup}
}

// Scheme is dns: the builder stands in for gRPC's dns resolver on the connections it is given
// to (grpc.WithResolvers), and nowhere else.
func (b *builder) Scheme() string { return "dns" }

// Build starts resolving t's host.
func (b *builder) Build(t resolver.Target, cc resolver.ClientConn, _ resolver.BuildOptions) (resolver.Resolver, error) {
	if t.URL.Host != "" {
		return nil, fmt.Errorf("grpcdial: %q names a DNS server; only the system's resolver is supported", t.String())
	}
	host, port, err := splitHostPort(t.Endpoint())
	if err != nil {
		return nil, err
	}
	if net.ParseIP(host) != nil {
		// An address, not a name: nothing to look up, ever.
		if err := cc.UpdateState(resolver.State{Addresses: []resolver.Address{{Addr: net.JoinHostPort(host, port)}}}); err != nil {
			return nil, err
		}
		return nopResolver{}, nil
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &dnsResolver{host: host, port: port, cc: cc, b: b, ctx: ctx, cancel: cancel,
		now: make(chan struct{}, 1), done: make(chan struct{})}
	go r.run()
	return r, nil
}

func splitHostPort(endpoint string) (host, port string, err error) {
	if endpoint == "" {
		return "", "", errors.New("grpcdial: empty target")
	}
	host, port, err = net.SplitHostPort(endpoint)
	if err != nil {
		// No port (or an IPv6 address without brackets): the whole endpoint is the host.
		if ip := net.ParseIP(endpoint); ip != nil || !strings.Contains(endpoint, ":") {
			return endpoint, defaultPort, nil
		}
		return "", "", fmt.Errorf("grpcdial: target %q: %w", endpoint, err)
	}
	if host == "" {
		host = "localhost"
	}
	if port == "" {
		port = defaultPort
	}
	if _, err := strconv.ParseUint(port, 10, 16); err != nil {
		return "", "", fmt.Errorf("grpcdial: target %q: bad port", endpoint)
	}
	return host, port, nil
}

// dnsResolver looks its host up every b.refresh, and at gRPC's request at most once per
// minLookupGap, and tells gRPC when the set of addresses changes.
type dnsResolver struct {
	host, port string
	cc         resolver.ClientConn
	b          *builder
	ctx        context.Context
	cancel     context.CancelFunc
	now        chan struct{} // ResolveNow's request, at most one pending
	done       chan struct{}
	closeOnce  sync.Once
}

// ResolveNow asks for a lookup soon (gRPC calls it when a connection to an address fails).
func (r *dnsResolver) ResolveNow(resolver.ResolveNowOptions) {
	select {
	case r.now <- struct{}{}:
	default:
	}
}

// Close stops the lookups and waits for the one running.
func (r *dnsResolver) Close() {
	r.closeOnce.Do(r.cancel)
	<-r.done
}

func (r *dnsResolver) run() {
	defer close(r.done)
	var last []string
	var lastLookup time.Time
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-r.ctx.Done():
			return
		case <-timer.C:
		case <-r.now:
			if gap := time.Until(lastLookup.Add(minLookupGap)); gap > 0 {
				// Too soon after the last lookup: look up once the gap has passed.
				timer.Stop()
				timer.Reset(gap)
				continue
			}
			timer.Stop()
		}
		lastLookup = time.Now()
		addrs, err := r.resolve()
		if r.ctx.Err() != nil {
			return
		}
		next := r.b.refresh
		switch {
		case err != nil && last == nil:
			// Nothing known yet: calls fail UNAVAILABLE with why, until a lookup succeeds.
			r.cc.ReportError(err)
			next = minLookupGap
		case err != nil:
			// Keep the addresses known; a name that stops resolving for a moment (a DNS
			// server restarting) does not take working replicas away.
			next = minLookupGap
		case !slices.Equal(addrs, last):
			state := resolver.State{Addresses: make([]resolver.Address, len(addrs))}
			for i, a := range addrs {
				state.Addresses[i] = resolver.Address{Addr: net.JoinHostPort(a, r.port)}
			}
			if err := r.cc.UpdateState(state); err == nil {
				last = addrs
			}
		}
		timer.Reset(next)
	}
}

// resolve is the host's addresses, sorted so that an unchanged set compares equal.
func (r *dnsResolver) resolve() ([]string, error) {
	ctx, cancel := context.WithTimeout(r.ctx, lookupTimeout)
	defer cancel()
	addrs, err := r.b.lookup(ctx, r.host)
	if err != nil {
		return nil, fmt.Errorf("grpcdial: look up %s: %w", r.host, err)
	}
	if len(addrs) == 0 {
		return nil, fmt.Errorf("grpcdial: %s has no addresses", r.host)
	}
	addrs = slices.Clone(addrs)
	slices.Sort(addrs)
	return slices.Compact(addrs), nil
}

// nopResolver is the resolver of a literal address.
type nopResolver struct{}

func (nopResolver) ResolveNow(resolver.ResolveNowOptions) {}
func (nopResolver) Close()                                {}
