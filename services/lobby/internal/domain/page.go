package domain

import (
	"cmp"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"time"

	"github.com/vigil-dev/vigil/pkg/input"
)

// Page sizes (AIP-158): a request without one gets DefaultPageSize.
const (
	DefaultPageSize = 50
	MaxPageSize     = 200
	// PageTokenTTL is how long a page token is honoured; paging on after that starts again.
	PageTokenTTL = time.Hour
)

// CheckPageSize validates a page size a caller set.
func CheckPageSize(n int32) error { return input.Int("limit", int64(n), 1, MaxPageSize) }

// Position is a place in the lobby's order: most recently active first, then by code,
// descending. A page starts after the position of the previous page's last room. Rooms only
// ever move up in this order (activity never goes back), so a room that does not change while
// a caller pages stays on the same side of every position: it is listed exactly once, and a
// room that moved up past the caller's position is not listed twice.
type Position struct {
	LastActivity int64
	Code         string
}

// AtOrBefore reports whether room r is at or before position p in the lobby's order: a page
// after p leaves it out.
func (p Position) AtOrBefore(r Room) bool {
	return ByActivity(r, Room{LastActivity: p.LastActivity, Code: p.Code}) <= 0
}

// ByActivity orders rooms most recently active first, then by code, descending (as Redis
// orders equal scores in ZREVRANGE).
func ByActivity(a, b Room) int {
	if c := cmp.Compare(b.LastActivity, a.LastActivity); c != 0 {
		return c
	}
	return cmp.Compare(b.Code, a.Code)
}

// The page token (base64url, no padding) is
//
//	version(1) | expires ms(8) | lastActivity ms(8) | filter(8) | code length(1) | code | mac(16)
//
// where filter is the first 8 bytes of SHA-256 over the query and the joinable flag (a token
// only continues the same search) and mac the first 16 bytes of HMAC-SHA256 over everything
// before it, keyed by the lobby's page key (kept in Redis, shared by every replica). It is
// opaque to callers; the MAC makes a changed token a refused one, not a jump elsewhere.
const (
	tokenVersion  = 1
	tokenMACLen   = 16
	tokenFixedLen = 1 + 8 + 8 + 8 + 1
	maxPageToken  = 256
)

var (
	// ErrGarbledPageToken refuses a token the page key does not verify: changed, cut short, or
	// signed with another key.
	ErrGarbledPageToken = invalid("This pageToken is not one the lobby gave out (it was changed or cut short); list again without pageToken to start from the first page.")
	errExpiredToken     = invalid("This pageToken has expired (page tokens last 1 hour); list again without pageToken to start from the first page.")
	errOtherSearch      = invalid("This pageToken belongs to another search: keep q and joinable the same while paging, or list again without pageToken.")
)

// Filter is what a page token binds to: the search it continues.
func Filter(query string, joinable bool) [8]byte {
	h := sha256.New()
	h.Write([]byte(query))
	if joinable {
		h.Write([]byte{0, 1})
	} else {
		h.Write([]byte{0, 0})
	}
	var f [8]byte
	copy(f[:], h.Sum(nil))
	return f
}

// EncodePageToken makes the token of the page after position p.
func EncodePageToken(key []byte, p Position, filter [8]byte, expires time.Time) string {
	b := make([]byte, 0, tokenFixedLen+len(p.Code)+tokenMACLen)
	b = append(b, tokenVersion)
	b = binary.BigEndian.AppendUint64(b, uint64(expires.UnixMilli()))
	b = binary.BigEndian.AppendUint64(b, uint64(p.LastActivity))
	b = append(b, filter[:]...)
	b = append(b, byte(len(p.Code)))
	b = append(b, p.Code...)
	b = append(b, mac(key, b)...)
	return base64.RawURLEncoding.EncodeToString(b)
}

// DecodePageToken checks a page token (its MAC, its search and its expiry at now) and
// returns the position it continues from. Every refusal is an ErrInvalid with a sentence.
func DecodePageToken(key []byte, token string, filter [8]byte, now time.Time) (Position, error) {
	if len(token) > maxPageToken {
		return Position{}, ErrGarbledPageToken
	}
	b, err := base64.RawURLEncoding.Strict().DecodeString(token)
	if err != nil || len(b) < tokenFixedLen+tokenMACLen || b[0] != tokenVersion {
		return Position{}, ErrGarbledPageToken
	}
	body, sum := b[:len(b)-tokenMACLen], b[len(b)-tokenMACLen:]
	if !hmac.Equal(sum, mac(key, body)) {
		return Position{}, ErrGarbledPageToken
	}
	codeLen := int(body[tokenFixedLen-1])
	if len(body) != tokenFixedLen+codeLen {
		return Position{}, ErrGarbledPageToken
	}
	if [8]byte(body[17:25]) != filter {
		return Position{}, errOtherSearch
	}
	if expires := int64(binary.BigEndian.Uint64(body[1:9])); now.UnixMilli() >= expires {
		return Position{}, errExpiredToken
	}
	return Position{LastActivity: int64(binary.BigEndian.Uint64(body[9:17])), Code: string(body[tokenFixedLen:])}, nil
}

func mac(key, b []byte) []byte {
	h := hmac.New(sha256.New, key)
	h.Write(b)
	return h.Sum(nil)[:tokenMACLen]
}
