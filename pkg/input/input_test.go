package input

import (
	"errors"
	"strings"
	"testing"

	"github.com/vigil-dev/vigil/pkg/usererr"
)

func TestName(t *testing.T) {
	good := []string{"orders/42", "Order:42", "report.daily", "user@example.com", "日報", "a{b}c", "}", "a b", strings.Repeat("x", 256)}
	for _, s := range good {
		if err := Name("resource", s, 256); err != nil {
			t.Errorf("Name(%q) = %v, want nil", s, err)
		}
	}
	bad := []string{"", strings.Repeat("x", 257), "a\nb", "tab\there", "\x00", "bad\xffutf8", "del\x7f", "c1\u0085"}
	for _, s := range bad {
		err := Name("resource", s, 256)
		if !errors.Is(err, usererr.ErrInvalid) {
			t.Errorf("Name(%q) = %v, want ErrInvalid", s, err)
			continue
		}
		if want := "resource must be 1 to 256 bytes of UTF-8 text without control characters."; err.Error() != want {
			t.Errorf("Name(%q) says %q, want %q", s, err, want)
		}
	}
	// The limit counts bytes: 86 three-byte characters are 258 bytes.
	if err := Name("resource", strings.Repeat("日", 86), 256); err == nil {
		t.Error("Name(86 × 日) = nil, want an error (258 bytes)")
	}
}

func TestSlug(t *testing.T) {
	for _, s := range []string{"seat-12a", "abc", strings.Repeat("a", 40)} {
		if err := Slug("reservation ID", s); err != nil {
			t.Errorf("Slug(%q) = %v", s, err)
		}
	}
	for _, s := range []string{"ab", "-abc", "abc-", "ABC", "a_bc", strings.Repeat("a", 41), "orders/42"} {
		err := Slug("reservation ID", s)
		if want := "Use a lowercase reservation ID containing 3-40 letters, digits, or hyphens."; err == nil || err.Error() != want {
			t.Errorf("Slug(%q) = %v, want %q", s, err, want)
		}
	}
}

func TestText(t *testing.T) {
	if err := Text("username", "익명", 1, 64); err != nil {
		t.Errorf("Text(익명) = %v", err)
	}
	if err := Text("username", strings.Repeat("익", 65), 1, 64); err == nil || err.Error() != "username must be 1 to 64 characters." {
		t.Errorf("Text(65 chars) = %v", err)
	}
	if err := Text("username", "a\tb", 1, 64); err == nil || err.Error() != "username must be UTF-8 text without control characters." {
		t.Errorf("Text(tab) = %v", err)
	}
}

func TestSafeInt(t *testing.T) {
	for _, v := range []int64{1, MaxSafeInt} {
		if err := PositiveSafeInt("now", v); err != nil {
			t.Errorf("PositiveSafeInt(%d) = %v", v, err)
		}
	}
	for _, v := range []int64{0, -1, MaxSafeInt + 1, 1e17} {
		err := PositiveSafeInt("now", v)
		if want := "now must be an integer from 1 through 9007199254740991."; err == nil || err.Error() != want {
			t.Errorf("PositiveSafeInt(%d) = %v, want %q", v, err, want)
		}
	}
	if err := SafeInt("x", -MaxSafeInt-1); err == nil {
		t.Error("SafeInt(-2^53) = nil")
	}
}
