package domain

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func ptr(v int64) *int64 { return &v }

func TestCheckResource(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		ok   bool
	}{
		{"abc", true}, {"a-b", true}, {"0ab", true}, {strings.Repeat("a", 40), true},
		{"ab", false}, {strings.Repeat("a", 41), false}, {"-ab", false}, {"ab-", false},
		{"Abc", false}, {"a_b", false}, {"a.b", false}, {"", false}, {"abc\n", false},
	} {
		err := CheckResource(tc.name)
		if (err == nil) != tc.ok {
			t.Errorf("CheckResource(%q) = %v, want ok=%v", tc.name, err, tc.ok)
		}
		if err != nil && (!errors.Is(err, ErrInvalid) || err.Error() != MsgResource) {
			t.Errorf("CheckResource(%q) = %v, want %q matching ErrInvalid", tc.name, err, MsgResource)
		}
	}
}

func TestCheckOwner(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		owner string
		ok    bool
	}{
		{"a", true}, {"worker 7", true}, {"héllo-ü", true}, {strings.Repeat("x", 128), true},
		{strings.Repeat("é", 128), true},
		{"", false}, {strings.Repeat("x", 129), false}, {"a\nb", false}, {"a\tb", false},
		{"\x00", false}, {"\xff", false}, {"a\u200bb", false},
	} {
		err := CheckOwner(tc.owner)
		if (err == nil) != tc.ok {
			t.Errorf("CheckOwner(%q) = %v, want ok=%v", tc.owner, err, tc.ok)
		}
		if err != nil && err.Error() != MsgOwner {
			t.Errorf("CheckOwner(%q) = %q, want %q", tc.owner, err, MsgOwner)
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
		{ptr(99), 0, MsgTTL}, {ptr(0), 0, MsgTTL}, {ptr(-5), 0, MsgTTL}, {ptr(3600001), 0, MsgTTL},
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
		{ptr(-1), 0, MsgWait}, {ptr(60001), 0, MsgWait},
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
