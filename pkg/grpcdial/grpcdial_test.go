package grpcdial

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/status"

	"github.com/vigil-dev/vigil/pkg/wait"
)

func TestTarget(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"room:7005", "dns:///room:7005"},
		{"127.0.0.1:7001", "dns:///127.0.0.1:7001"},
		{"[::1]:7001", "dns:///[::1]:7001"},
		{"dns:///room:7005", "dns:///room:7005"},
		{"passthrough:///room:7005", "passthrough:///room:7005"},
		{"unix:/run/vigil.sock", "unix:/run/vigil.sock"},
	} {
		if got := Target(tc.in); got != tc.want {
			t.Errorf("Target(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestSplitHostPort(t *testing.T) {
	for _, tc := range []struct{ in, host, port string }{
		{"room:7005", "room", "7005"},
		{"room", "room", "443"},
		{":7005", "localhost", "7005"},
		{"[::1]:7", "::1", "7"},
		{"::1", "::1", "443"},
	} {
		host, port, err := splitHostPort(tc.in)
		if err != nil || host != tc.host || port != tc.port {
			t.Errorf("splitHostPort(%q) = %q, %q, %v, want %q, %q", tc.in, host, port, err, tc.host, tc.port)
		}
	}
	for _, bad := range []string{"", "room:http", "a:b:c"} {
		if _, _, err := splitHostPort(bad); err == nil {
			t.Errorf("splitHostPort(%q) succeeded, want an error", bad)
		}
	}
}

// backend is a health server on one loopback address that counts the calls it answers.
type backend struct {
	addr  string
	calls atomic.Int64
	srv   *grpc.Server
}

// backends listen on 127.0.0.1, 127.0.0.2, ... with one port, as replicas behind one DNS name.
func backends(t *testing.T, n int) []*backend {
	t.Helper()
	for attempt := 0; attempt < 20; attempt++ {
		var lis []net.Listener
		first, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		lis = append(lis, first)
		port := strconv.Itoa(first.Addr().(*net.TCPAddr).Port)
		for i := 2; i <= n; i++ {
			l, err := net.Listen("tcp", net.JoinHostPort(fmt.Sprintf("127.0.0.%d", i), port))
			if err != nil {
				break // the port is taken on that address: try another
			}
			lis = append(lis, l)
		}
		if len(lis) < n {
			for _, l := range lis {
				_ = l.Close()
			}
			continue
		}
		var bs []*backend
		for _, l := range lis {
			b := &backend{addr: l.Addr().String()}
			b.srv = grpc.NewServer(grpc.UnaryInterceptor(func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
				b.calls.Add(1)
				return h(ctx, req)
			}), grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: time.Second, PermitWithoutStream: true}))
			healthpb.RegisterHealthServer(b.srv, health.NewServer())
			go func() { _ = b.srv.Serve(l) }()
			t.Cleanup(b.srv.Stop)
			bs = append(bs, b)
		}
		return bs
	}
	t.Fatal("no port free on every loopback address")
	return nil
}

// names is a DNS stand-in whose answer the test changes.
type names struct {
	mu    sync.Mutex
	addrs []string
	err   error
}

func (n *names) set(err error, addrs ...string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.addrs, n.err = addrs, err
}

func (n *names) lookup(_ context.Context, host string) ([]string, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if host != "replicas" {
		return nil, fmt.Errorf("no such host %q", host)
	}
	return n.addrs, n.err
}

func dialNames(t *testing.T, n *names, port string, extra ...grpc.DialOption) healthpb.HealthClient {
	t.Helper()
	opts := append(append(balancing(),
		grpc.WithKeepaliveParams(ClientParameters()),
		grpc.WithResolvers(newBuilder(20*time.Millisecond, n.lookup)),
		grpc.WithTransportCredentials(insecure.NewCredentials()),
	), extra...)
	conn, err := grpc.NewClient(Target("replicas:"+port), opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return healthpb.NewHealthClient(conn)
}

func check(c healthpb.HealthClient) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err := c.Check(ctx, &healthpb.HealthCheckRequest{})
	return err
}

func host(addr string) string { h, _, _ := net.SplitHostPort(addr); return h }

// Calls go to every address the name resolves to; an address added to the name is used, and
// one removed from it is dropped, without a failure or a restart.
func TestCallsFollowTheNamesAddresses(t *testing.T) {
	t.Parallel()
	bs := backends(t, 3)
	_, port, _ := net.SplitHostPort(bs[0].addr)
	n := &names{}
	n.set(nil, host(bs[0].addr), host(bs[1].addr))
	c := dialNames(t, n, port)

	wait.For(t, "calls on both resolved replicas", func() error {
		if err := check(c); err != nil {
			return err
		}
		if bs[0].calls.Load() == 0 || bs[1].calls.Load() == 0 {
			return fmt.Errorf("calls %d, %d", bs[0].calls.Load(), bs[1].calls.Load())
		}
		return nil
	})
	if got := bs[2].calls.Load(); got != 0 {
		t.Fatalf("the replica not in the name got %d calls, want 0", got)
	}

	n.set(nil, host(bs[0].addr), host(bs[1].addr), host(bs[2].addr)) // scaled up
	wait.For(t, "calls on the replica added to the name", func() error {
		if err := check(c); err != nil {
			return err
		}
		if bs[2].calls.Load() == 0 {
			return errors.New("none yet")
		}
		return nil
	})

	n.set(nil, host(bs[2].addr)) // scaled down to the new one
	wait.For(t, "ten calls in a row on the one replica left", func() error {
		before := bs[2].calls.Load()
		for range 10 {
			if err := check(c); err != nil {
				return err
			}
		}
		if got := bs[2].calls.Load() - before; got != 10 {
			return fmt.Errorf("%d of 10", got)
		}
		return nil
	})

	// A lookup failing for a moment keeps the replicas known.
	n.set(errors.New("SERVFAIL"))
	for i := range 20 {
		if err := check(c); err != nil {
			t.Fatalf("call %d while the name does not resolve: %v, want the known replica", i, err)
		}
	}
}

// A name that never resolved fails calls UNAVAILABLE with the lookup's error, and works once
// it resolves.
func TestUnresolvedNameFailsUntilItResolves(t *testing.T) {
	t.Parallel()
	bs := backends(t, 1)
	_, port, _ := net.SplitHostPort(bs[0].addr)
	n := &names{}
	n.set(errors.New("no such host"))
	c := dialNames(t, n, port)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	_, err := c.Check(ctx, &healthpb.HealthCheckRequest{}, grpc.WaitForReady(false))
	cancel()
	if status.Code(err) != codes.Unavailable {
		t.Fatalf("Check before the name resolves = %v, want UNAVAILABLE", err)
	}
	n.set(nil, host(bs[0].addr))
	wait.For(t, "a call once the name resolves", func() error { return check(c) })
}

// blackhole forwards TCP to target until stopped; then it holds every connection open and
// passes nothing, as a paused peer or a partition does.
type blackhole struct {
	lis    net.Listener
	target string
	silent atomic.Bool
}

func newBlackhole(t *testing.T, listen, target string) *blackhole {
	t.Helper()
	l, err := net.Listen("tcp", listen)
	if err != nil {
		t.Fatal(err)
	}
	b := &blackhole{lis: l, target: target}
	t.Cleanup(func() { _ = l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go b.serve(t, c)
		}
	}()
	return b
}

func (b *blackhole) serve(t *testing.T, c net.Conn) {
	up, err := net.Dial("tcp", b.target)
	if err != nil {
		_ = c.Close()
		return
	}
	t.Cleanup(func() { _ = c.Close(); _ = up.Close() })
	pipe := func(dst, src net.Conn) {
		buf := make([]byte, 32<<10)
		for {
			n, err := src.Read(buf)
			if err != nil {
				return
			}
			if b.silent.Load() {
				continue // swallowed: nothing closes, nothing arrives
			}
			if _, err := dst.Write(buf[:n]); err != nil {
				return
			}
		}
	}
	go pipe(up, c)
	go pipe(c, up)
}

// silenceable starts two replicas behind one name, replica 0 reached through a proxy on
// 127.0.0.3 that the test can silence, and returns a client with calls answered on both.
func silenceable(t *testing.T, extra ...grpc.DialOption) ([]*backend, *blackhole, healthpb.HealthClient) {
	t.Helper()
	bs := backends(t, 2)
	_, port, _ := net.SplitHostPort(bs[0].addr)
	hole := newBlackhole(t, net.JoinHostPort("127.0.0.3", port), bs[0].addr)
	n := &names{}
	n.set(nil, "127.0.0.3", host(bs[1].addr))
	c := dialNames(t, n, port, extra...)
	wait.Until(t, "calls on both replicas", func() bool {
		return check(c) == nil && bs[0].calls.Load() > 0 && bs[1].calls.Load() > 0
	})
	return bs, hole, c
}

// A replica that stops answering without closing anything is noticed by keepalive: the stream
// open on it fails UNAVAILABLE, and calls go to the other replica. Takes up to
// KeepaliveTime+KeepaliveTimeout (15s): gRPC does not let a client ping more often.
func TestSilentReplicaIsLeftByKeepalive(t *testing.T) {
	t.Parallel()
	bs, hole, c := silenceable(t)
	// A Watch stream on each replica: round robin puts one on each of two streams in a row.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var streams []healthpb.Health_WatchClient
	for range 2 {
		s, err := c.Watch(ctx, &healthpb.HealthCheckRequest{})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.Recv(); err != nil {
			t.Fatal(err)
		}
		streams = append(streams, s)
	}

	hole.silent.Store(true)
	silenced := time.Now()
	ended := make(chan error, 2)
	for _, s := range streams {
		go func() {
			_, err := s.Recv()
			for err == nil {
				_, err = s.Recv()
			}
			ended <- err
		}()
	}
	// The stream on the silent replica ends UNAVAILABLE; the other stays open.
	select {
	case err := <-ended:
		if status.Code(err) != codes.Unavailable {
			t.Fatalf("the stream on the silent replica ended with %v, want UNAVAILABLE", err)
		}
		t.Logf("silent replica noticed after %v (keepalive %v + %v)", time.Since(silenced).Round(100*time.Millisecond), KeepaliveTime, KeepaliveTimeout)
	case <-time.After(time.Minute):
		t.Fatal("the stream on the silent replica did not end in a minute: no keepalive")
	}
	allAnsweredBy(t, c, bs[1], 10, "after the silent replica was noticed")
	select {
	case err := <-ended:
		t.Errorf("the stream on the answering replica ended too: %v", err)
	default:
	}
}

// A replica that stops answering is passed over once a call to it has gone unanswered for the
// stall threshold: the calls after that all go to the replica that answers, long before
// keepalive closes the silent one's connection (the call stuck on it is still waiting), and
// still after the stuck call runs out of time (a REST caller's retry after its 503).
func TestStalledReplicaIsPassedOver(t *testing.T) {
	t.Parallel()
	const stallAfter = 200 * time.Millisecond
	bs, hole, c := silenceable(t, grpc.WithDefaultServiceConfig(fmt.Sprintf(`{"loadBalancingConfig":[{%q:{"stallAfterMs":%d}}]}`, BalancerName, stallAfter.Milliseconds())))

	hole.silent.Store(true)
	// Two calls in a row: round robin puts one on each replica; the silent one's waits until
	// its deadline, long before keepalive could close the connection (10 s of silence first).
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	picked := time.Now()
	answers := make(chan error, 2)
	for range 2 {
		go func() {
			_, err := c.Check(ctx, &healthpb.HealthCheckRequest{})
			answers <- err
		}()
	}
	if err := <-answers; err != nil {
		t.Fatalf("the call on the answering replica: %v", err)
	}
	wait.Until(t, "the stall threshold passed", func() bool { return time.Since(picked) > 2*stallAfter })

	allAnsweredBy(t, c, bs[1], 20, "after the silent replica's call stalled")
	if err := <-answers; status.Code(err) != codes.DeadlineExceeded {
		t.Fatalf("the call on the silent replica ended with %v, want DEADLINE_EXCEEDED (its connection still up)", err)
	}
	allAnsweredBy(t, c, bs[1], 20, "after the stalled call ran out of time")
}

// allAnsweredBy makes n calls and fails unless every one is answered, by b.
func allAnsweredBy(t *testing.T, c healthpb.HealthClient, b *backend, n int64, when string) {
	t.Helper()
	before := b.calls.Load()
	for i := range n {
		if err := check(c); err != nil {
			t.Fatalf("call %d %s: %v, want it answered by %s", i, when, err, b.addr)
		}
	}
	if got := b.calls.Load() - before; got != n {
		t.Errorf("%s, %d of %d calls went to %s, want all", when, got, n, b.addr)
	}
}

func TestBalancerConfig(t *testing.T) {
	for _, tc := range []struct {
		js   string
		want int64
		bad  bool
	}{
		{js: `{}`},
		{js: `{"stallAfterMs":250}`, want: 250},
		{js: `{"stallAfterMs":-1}`, bad: true},
		{js: `{"stallAfterMs":"soon"}`, bad: true},
	} {
		c, err := stallAwareBuilder{}.ParseConfig([]byte(tc.js))
		if tc.bad {
			if err == nil {
				t.Errorf("ParseConfig(%s) succeeded, want an error", tc.js)
			}
			continue
		}
		if err != nil || c.(*lbConfig).StallAfterMs != tc.want {
			t.Errorf("ParseConfig(%s) = %+v, %v; want stallAfterMs %d", tc.js, c, err, tc.want)
		}
	}
}

// The oldest call still open decides; ended calls do not count however old they were.
func TestInflightStalled(t *testing.T) {
	var in inflight
	t0 := time.Unix(1000, 0)
	a := in.begin(t0)
	b := in.begin(t0.Add(time.Second))
	if !in.stalled(t0.Add(1500*time.Millisecond), time.Second) {
		t.Error("a call open 1.5 s is not a stall of 1 s")
	}
	in.end(a, nil, t0.Add(1500*time.Millisecond), time.Second) // answered late: no suspicion
	if in.stalled(t0.Add(1500*time.Millisecond), time.Second) {
		t.Error("an ended call still counts")
	}
	if !in.stalled(t0.Add(2500*time.Millisecond), time.Second) {
		t.Error("the call left open 1.5 s is not a stall")
	}
	gaveUp := t0.Add(3 * time.Second)
	in.end(b, status.Error(codes.DeadlineExceeded, "late"), gaveUp, time.Second)
	if n, err := in.retained(); n != 0 || err != nil {
		t.Errorf("no call open, %d calls kept (%v)", n, err)
	}
	if !in.stalled(gaveUp.Add(Suspicion-time.Millisecond), time.Second) || in.stalled(gaveUp.Add(Suspicion), time.Second) {
		t.Errorf("a call that ran out of time after 2 s: want the address suspect for %v", Suspicion)
	}
	c := in.begin(gaveUp)
	in.end(c, nil, gaveUp.Add(time.Millisecond), time.Second)
	if in.stalled(gaveUp.Add(time.Millisecond), time.Second) {
		t.Error("an answered call did not clear the suspicion")
	}
	d := in.begin(gaveUp)
	in.end(d, status.Error(codes.Canceled, "the caller left"), gaveUp.Add(5*time.Second), time.Second)
	if in.stalled(gaveUp.Add(5*time.Second), time.Second) {
		t.Error("a call its caller gave up on made the address suspect")
	}
	e := in.begin(gaveUp)
	in.end(e, status.Error(codes.DeadlineExceeded, "late"), gaveUp.Add(10*time.Millisecond), time.Second)
	if in.stalled(gaveUp.Add(10*time.Millisecond), time.Second) {
		t.Error("a call that ran out of time at once (a deadline shorter than the threshold) made the address suspect")
	}
}

// A call held open while thousands begin and end after it keeps the list at the calls open:
// what ended is gone at once, not when the oldest call ends or the picker looks.
func TestInflightKeepsOnlyOpenCalls(t *testing.T) {
	var in inflight
	t0 := time.Unix(1000, 0)
	held := in.begin(t0)
	var open []*call
	for i := range 10_000 {
		open = append(open, in.begin(t0.Add(time.Duration(i)*time.Microsecond)))
		if len(open) == 8 {
			for _, c := range open {
				in.end(c, nil, t0.Add(time.Duration(i)*time.Microsecond), time.Second)
			}
			open = open[:0]
		}
		if n, err := in.retained(); n > 9 || err != nil {
			t.Fatalf("after %d calls, %d kept (%v), want at most the 9 open", i+1, n, err)
		}
	}
	if !in.stalled(t0.Add(1500*time.Millisecond), time.Second) {
		t.Error("the call held open 1.5 s is not a stall: the oldest open call was lost")
	}
	in.end(held, nil, t0.Add(2*time.Second), time.Second)
	in.end(held, nil, t0.Add(2*time.Second), time.Second) // a second end changes nothing
	if n, err := in.retained(); n != 0 || err != nil || in.stalled(t0.Add(2*time.Second), time.Second) {
		t.Errorf("every call ended: %d kept (%v), stalled %v; want none", n, err, in.stalled(t0.Add(2*time.Second), time.Second))
	}
}

// With one address (the default deployment: one replica) and calls that always overlap, the
// picker never compares addresses, and what it keeps per call must still end with the call:
// 16 callers make thousands of calls while one more is held open the whole time, and the
// calls the connection's picker keeps never exceed the calls open.
func TestOneAddressOverlappingCallsKeepBoundedState(t *testing.T) {
	const callers, calls = 16, 20_000
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	release := make(chan struct{})
	var holding atomic.Bool
	srv := grpc.NewServer(grpc.UnaryInterceptor(func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		if r, ok := req.(*healthpb.HealthCheckRequest); ok && r.Service == "held" {
			holding.Store(true)
			<-release
		}
		return h(ctx, req)
	}))
	hs := health.NewServer()
	hs.SetServingStatus("held", healthpb.HealthCheckResponse_SERVING)
	healthpb.RegisterHealthServer(srv, hs)
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)

	conn, err := grpc.NewClient("passthrough:///"+lis.Addr().String(), append(balancing(),
		grpc.WithDefaultServiceConfig(fmt.Sprintf(`{"loadBalancingConfig":[{%q:{}}]}`, observedBalancerName)),
		grpc.WithTransportCredentials(insecure.NewCredentials()))...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	c := healthpb.NewHealthClient(conn)
	if err := check(c); err != nil {
		t.Fatal(err)
	}
	pb := <-observedBuilds

	held := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		_, err := c.Check(ctx, &healthpb.HealthCheckRequest{Service: "held"})
		held <- err
	}()
	wait.Until(t, "the held call at the server", holding.Load)

	var next, most atomic.Int64
	failed := make(chan error, callers)
	var wg sync.WaitGroup
	for range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := next.Add(1); i <= calls; i = next.Add(1) {
				if err := check(c); err != nil {
					failed <- err
					return
				}
				if i%100 == 0 {
					n, err := pb.retained()
					if err != nil {
						failed <- err
						return
					}
					for m := most.Load(); int64(n) > m && !most.CompareAndSwap(m, int64(n)); m = most.Load() {
					}
				}
			}
		}()
	}
	wg.Wait()
	close(failed)
	if err := <-failed; err != nil {
		t.Fatal(err)
	}
	n, err := pb.retained()
	if err != nil {
		t.Fatal(err)
	}
	if n != 1 || most.Load() > callers+1 {
		t.Errorf("after %d calls by %d callers beside one held open: %d calls kept (at most %d while they ran), want 1 (the held call) and at most %d",
			calls, callers, n, most.Load(), callers+1)
	}
	close(release)
	if err := <-held; err != nil {
		t.Fatalf("the held call: %v", err)
	}
	wait.For(t, "nothing kept once every call ended", func() error {
		n, err := pb.retained()
		if err == nil && n != 0 {
			err = fmt.Errorf("%d calls kept", n)
		}
		return err
	})
}
