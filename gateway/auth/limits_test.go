package auth

import (
	"net/http/httptest"
	"net/netip"
	"testing"
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
