// Package domain is the lobby's pure logic: what a room in the lobby is, what input is valid,
// how codes and leader tokens are made, and the typed errors the transport maps to gRPC codes.
package domain

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/vigil-dev/vigil/pkg/usererr"
)

// Errors the transport maps to gRPC codes (in one function).
var (
	// ErrInvalid marks bad input; the wrapping UserError says what to fix.
	ErrInvalid = errors.New("invalid argument")
	// ErrNotFound marks a room that is not in the lobby.
	ErrNotFound = errors.New("room not found")
)

// UserError is an error with a sentence a person can act on (shared by every domain).
type UserError = usererr.Error

func invalid(msg string) error { return &UserError{Kind: ErrInvalid, Msg: msg} }

// NotFound is the error for a code with no room.
func NotFound(code string) error {
	return &UserError{Kind: ErrNotFound, Msg: fmt.Sprintf("No room %q in the lobby.", code)}
}

// Video is what a room practises with.
type Video struct {
	Title      string
	DurationMs int64
}

// Room is a room as the lobby lists it. Times are ms since the Unix epoch.
type Room struct {
	Code          string
	Name          string
	Video         Video
	Viewers       int32
	LeaderPresent bool
	LastActivity  int64
	CreatedAt     int64
}

// Limits of the input.
const (
	MaxNameLen     = 80
	MaxTitleLen    = 200
	MaxDurationMs  = 24 * 60 * 60 * 1000
	CodeLen        = 6
	codeAlphabet   = "abcdefghjkmnpqrstuvwxyz23456789" // no 0/o, 1/l/i: codes are read aloud
	tokenBytes     = 32
	maxTokenLength = 256
)

var codePattern = regexp.MustCompile(`^[a-z0-9](?:[a-z0-9-]{1,38}[a-z0-9])$`)

// CheckCode validates a room code as it appears in a path.
func CheckCode(code string) error {
	if !codePattern.MatchString(code) {
		return invalid("Use a room code of 3-40 lowercase letters, digits, or hyphens.")
	}
	return nil
}

// CheckNewRoom validates a room's name and video; it returns them trimmed.
func CheckNewRoom(name string, v *Video) (string, Video, error) {
	name = strings.TrimSpace(name)
	if n := utf8.RuneCountInString(name); n < 1 || n > MaxNameLen || !printable(name) {
		return "", Video{}, invalid(fmt.Sprintf("Give the room a name of 1-%d printable characters.", MaxNameLen))
	}
	if v == nil {
		return "", Video{}, invalid("Describe the video: {\"title\", \"durationMs\"}.")
	}
	title := strings.TrimSpace(v.Title)
	if n := utf8.RuneCountInString(title); n < 1 || n > MaxTitleLen || !printable(title) {
		return "", Video{}, invalid(fmt.Sprintf("Give the video a title of 1-%d printable characters.", MaxTitleLen))
	}
	if v.DurationMs < 1 || v.DurationMs > MaxDurationMs {
		return "", Video{}, invalid(fmt.Sprintf("video.durationMs must be an integer from 1 through %d.", MaxDurationMs))
	}
	return name, Video{Title: title, DurationMs: v.DurationMs}, nil
}

// printable is false for any control character: names and titles are one line, which also
// lets the store keep them newline-separated.
func printable(s string) bool {
	for _, r := range s {
		if unicode.IsControl(r) || r == utf8.RuneError {
			return false
		}
	}
	return true
}

// NewCode draws a random room code of CodeLen characters.
func NewCode() string {
	var b [CodeLen]byte
	_, _ = rand.Read(b[:])
	for i := range b {
		b[i] = codeAlphabet[int(b[i])%len(codeAlphabet)]
	}
	return string(b[:])
}

// NewLeaderToken draws a random leader token and returns it with its hash (the only thing
// stored).
func NewLeaderToken() (token, hash string) {
	var b [tokenBytes]byte
	_, _ = rand.Read(b[:])
	token = base64.RawURLEncoding.EncodeToString(b[:])
	return token, HashToken(token)
}

// HashToken is the stored form of a leader token.
func HashToken(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:])
}

// TokenMatches compares a presented token with a stored hash in constant time.
func TokenMatches(token, hash string) bool {
	if token == "" || len(token) > maxTokenLength || hash == "" {
		return false
	}
	return subtle.ConstantTimeCompare([]byte(HashToken(token)), []byte(hash)) == 1
}

// DeltaOutcome is what the lobby did with an occupancy delta.
type DeltaOutcome int

// Outcomes of ApplyDelta.
const (
	// Applied: the delta was exactly the next one.
	Applied DeltaOutcome = iota + 1
	// Stale: already covered by an applied delta or snapshot.
	Stale
	// Resync: a delta is missing; the room must send a snapshot.
	Resync
)

// NextDelta is the Go twin of delta.lua's rule: a delta with sequence number seq is applied
// only when it is the one after cur.
func NextDelta(cur, seq int64) DeltaOutcome {
	switch {
	case seq <= cur:
		return Stale
	case seq == cur+1:
		return Applied
	default:
		return Resync
	}
}
