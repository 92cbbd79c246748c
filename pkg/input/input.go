// Package input holds the rules every Vigil domain and the gateway apply to what people type
// (names, free text, integers) and the one sentence each rule answers with, so the gateway and
// the services say the same thing for the same mistake. Every check returns nil or a
// *usererr.Error of kind usererr.ErrInvalid.
package input

import (
	"regexp"
	"unicode"
	"unicode/utf8"

	"github.com/vigil-dev/vigil/pkg/usererr"
)

// MaxSafeInt is the largest integer a JavaScript number holds exactly (2^53 - 1). Every
// integer in Vigil's JSON contract lies within ±MaxSafeInt, so a browser reads back what the
// service stored.
const MaxSafeInt = 1<<53 - 1

// slugPattern is the seed lab's name rule: 3-40 lowercase letters, digits or hyphens, starting
// and ending with a letter or digit. Reservation ids and room codes follow it.
var slugPattern = regexp.MustCompile(`^[a-z0-9](?:[a-z0-9-]{1,38}[a-z0-9])$`)

// Slug checks s against the seed lab's name rule; noun names the thing in the sentence
// ("reservation ID", "room code").
func Slug(noun, s string) error {
	if !slugPattern.MatchString(s) {
		return usererr.Invalid("Use a lowercase %s containing 3-40 letters, digits, or hyphens.", noun)
	}
	return nil
}

// IsSlug reports whether s follows the seed lab's name rule.
func IsSlug(s string) bool { return slugPattern.MatchString(s) }

// Name checks a name as people write it: valid UTF-8 of 1 through maxBytes bytes with no
// control characters. "orders/42", "Order:42", "user@example.com" and "日報" are names; so
// is a name holding "{" or "}" (stores keep such names cluster-safe with redisx.Tag). field
// is the JSON field or path parameter the sentence names.
func Name(field, s string, maxBytes int) error {
	if len(s) == 0 || len(s) > maxBytes || !utf8.ValidString(s) || hasControl(s) {
		return usererr.Invalid("%s must be 1 to %d bytes of UTF-8 text without control characters.", field, maxBytes)
	}
	return nil
}

// Text checks free text: valid UTF-8 of min through max characters (code points) with no
// control characters.
func Text(field, s string, min, max int) error {
	if !utf8.ValidString(s) || hasControl(s) {
		return usererr.Invalid("%s must be UTF-8 text without control characters.", field)
	}
	if n := utf8.RuneCountInString(s); n < min || n > max {
		return usererr.Invalid("%s must be %d to %d characters.", field, min, max)
	}
	return nil
}

// Printable reports whether s is valid UTF-8 without control characters.
func Printable(s string) bool { return utf8.ValidString(s) && !hasControl(s) }

func hasControl(s string) bool {
	for _, r := range s {
		if unicode.IsControl(r) {
			return true
		}
	}
	return false
}

// Int checks that v lies in [min, max]; both bounds must lie within ±MaxSafeInt.
func Int(field string, v, min, max int64) error {
	if v < min || v > max {
		return usererr.Invalid("%s must be an integer from %d through %d.", field, min, max)
	}
	return nil
}

// SafeInt checks that v is an integer a JavaScript number holds exactly.
func SafeInt(field string, v int64) error { return Int(field, v, -MaxSafeInt, MaxSafeInt) }

// PositiveSafeInt checks that v is an integer from 1 through MaxSafeInt (timestamps, ids).
func PositiveSafeInt(field string, v int64) error { return Int(field, v, 1, MaxSafeInt) }
