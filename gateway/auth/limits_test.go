package auth

import (
	"net/http/httptest"
	"net/netip"
	"strconv"
	"testing"
	"time"
)

func TestClientAddr(t *testing.T) {
	t.Parallel()
	trusted := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}
	cases := []struct {
		remote, xff, want string
	}{
		{"192.0.2.1:5000", "", "192.0.2.1"},
		{"192.0.2.1:5000", "203.0.113.9", "192.0.2.1"},                          // untrusted peer: its header is ignored
		{"10.0.0.2:5000", "203.0.113.9", "203.0.113.9"},                         // trusted proxy
		{"10.0.0.2:5000", "198.51.100.7, 203.0.113.9, 10.0.0.3", "203.0.113.9"}, // right-most untrusted
		{"10.0.0.2:5000", "not-an-ip", "10.0.0.2"},
	}
	for _, c := range cases {
		r := httptest.NewRequest("GET", "/", nil)
		r.RemoteAddr = c.remote
		if c.xff != "" {
			r.Header.Set("X-Forwarded-For", c.xff)
		}
		if got := clientAddr(r, trusted); got != c.want {
			t.Errorf("clientAddr(%s, XFF %q) = %s, want %s", c.remote, c.xff, got, c.want)
		}
	}
}

// TestLimiterGroupsIPv6By64: the addresses of one IPv6 /64 share a bucket; another /64, an
// IPv4 address and an IPv4-mapped one do not.
func TestLimiterGroupsIPv6By64(t *testing.T) {
	t.Parallel()
	now := time.Unix(1_700_000_000, 0)
	s := newLimiterSet(1, 2, func() time.Time { return now })
	for _, addr := range []string{"2001:db8:1:2::1", "2001:db8:1:2:ffff::9"} {
		if ok, _ := s.allow("addr:" + clientID(addr)); !ok {
			t.Fatalf("allow(%s) refused within the burst", addr)
		}
	}
	if ok, wait := s.allow("addr:" + clientID("2001:db8:1:2:abcd::1")); ok || wait <= 0 {
		t.Errorf("a third address of the same /64 = %v, %v; want refused with a wait", ok, wait)
	}
	for _, addr := range []string{"2001:db8:1:3::1", "192.0.2.7", "::ffff:192.0.2.8"} {
		if ok, _ := s.allow("addr:" + clientID(addr)); !ok {
			t.Errorf("allow(%s) refused; its bucket is its own", addr)
		}
	}
	if got := clientID("::ffff:192.0.2.8"); got != "::ffff:192.0.2.8" {
		t.Errorf("clientID(IPv4-mapped) = %s, want the address", got)
	}
}

// TestLimiterIsBoundedAndForgetsRefilledBuckets: more identities than maxBuckets keep the set
// at maxBuckets (the idlest go), and a bucket idle for its refill time is full again.
func TestLimiterIsBoundedAndForgetsRefilledBuckets(t *testing.T) {
	t.Parallel()
	now := time.Unix(1_700_000_000, 0)
	s := newLimiterSet(1, 1, func() time.Time { return now })
	if ok, _ := s.allow("key:a"); !ok {
		t.Fatal("first request refused")
	}
	if ok, _ := s.allow("key:a"); ok {
		t.Fatal("second request at once allowed, want refused (burst 1)")
	}
	now = now.Add(1100 * time.Millisecond)
	if ok, _ := s.allow("key:a"); !ok {
		t.Fatal("a request after the refill time refused")
	}
	for i := range maxBuckets + 10 {
		s.allow("addr:" + strconv.Itoa(i))
	}
	if n := s.buckets.Len(); n != maxBuckets {
		t.Errorf("buckets = %d after a flood, want %d", n, maxBuckets)
	}
	if s.buckets.Contains("key:a") {
		t.Error("the idlest bucket survived a flood of newer identities")
	}
}
