package domain

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func ptr(v int64) *int64 { return &v }

const (
	msgResource = "resource must be 1 to 256 bytes of UTF-8 text without control characters."
	msgOwner    = "owner must be 1 to 256 bytes of UTF-8 text without control characters."
	msgTTL      = "ttlMs must be an integer from 100 through 3600000."
	msgWait     = "waitMs must be an integer from 0 through 60000."
)

func TestNames(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		ok   bool
	}{
		{"abc", true}, {"orders/42", true}, {"Order:42", true}, {"report.daily", true},
		{"user@example.com", true}, {"日報", true}, {"{x}", true}, {"a}b{", true}, {"100%", true},
		{"worker 7", true}, {"x", true}, {strings.Repeat("x", 256), true}, {strings.Repeat("é", 128), true},
		{"", false}, {strings.Repeat("x", 257), false}, {strings.Repeat("é", 129), false},
		{"a\nb", false}, {"a\tb", false}, {"\x00", false}, {"\xff", false}, {"a\u0085b", false},
	} {
		for _, check := range []struct {
			f   func(string) error
			msg string
		}{{CheckResource, msgResource}, {CheckOwner, msgOwner}} {
			err := check.f(tc.name)
			if (err == nil) != tc.ok {
				t.Errorf("check(%q) = %v, want ok=%v", tc.name, err, tc.ok)
			}
			if err != nil && (!errors.Is(err, ErrInvalid) || err.Error() != check.msg) {
				t.Errorf("check(%q) = %v, want %q matching ErrInvalid", tc.name, err, check.msg)
			}
		}
	}
}

func TestTTLAndWait(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		ms   *int64
		want time.Duration
		err  string
	}{
		{nil, DefaultTTL, ""}, {ptr(100), 100 * time.Millisecond, ""}, {ptr(3600000), time.Hour, ""},
		{ptr(99), 0, msgTTL}, {ptr(0), 0, msgTTL}, {ptr(-5), 0, msgTTL}, {ptr(3600001), 0, msgTTL}, {ptr(1<<53 - 1), 0, msgTTL},
	} {
		got, err := TTL(tc.ms)
		if got != tc.want || errText(err) != tc.err {
			t.Errorf("TTL(%v) = %v, %v; want %v, %q", deref(tc.ms), got, err, tc.want, tc.err)
		}
	}
	for _, tc := range []struct {
		ms   *int64
		want time.Duration
		err  string
	}{
		{nil, 0, ""}, {ptr(0), 0, ""}, {ptr(60000), time.Minute, ""},
		{ptr(-1), 0, msgWait}, {ptr(60001), 0, msgWait}, {ptr(1 << 53), 0, msgWait}, {ptr(-(1 << 53)), 0, msgWait},
	} {
		got, err := Wait(tc.ms)
		if got != tc.want || errText(err) != tc.err {
			t.Errorf("Wait(%v) = %v, %v; want %v, %q", deref(tc.ms), got, err, tc.want, tc.err)
		}
	}
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

func deref(p *int64) any {
	if p == nil {
		return nil
	}
	return *p
}
