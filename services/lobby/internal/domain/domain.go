// Package domain is the lobby's pure logic: what a room in the lobby is, what input is valid,
// how codes and leader tokens are made, and the typed errors the transport maps to gRPC codes.
package domain

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"strings"

	"github.com/vigil-dev/vigil/pkg/input"
	"github.com/vigil-dev/vigil/pkg/usererr"
)

// Errors the transport maps to gRPC codes (in one function).
var (
	// ErrInvalid marks bad input; the wrapping UserError says what to fix.
	ErrInvalid = usererr.ErrInvalid
	// ErrNotFound marks a room that is not in the lobby.
	ErrNotFound = usererr.ErrNotFound
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
	// Search is Name prepared for a Query's Match (FoldName).
	Search Folded
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

// CheckCode validates a room code as it appears in a path: the shared slug rule.
func CheckCode(code string) error { return input.Slug("room code", code) }

// CheckSeq validates an occupancy sequence number: from min (0 or 1) through 2^53-1.
func CheckSeq(seq, min int64) error { return input.Int("seq", seq, min, input.MaxSafeInt) }

// CheckVersion validates a lobby version a caller says it knows.
func CheckVersion(v int64) error { return input.Int("knownVersion", v, 0, input.MaxSafeInt) }

// CheckCount validates an absolute count of viewers or leaders.
func CheckCount(field string, n int32) error { return input.Int(field, int64(n), 0, input.MaxSafeInt) }

// CheckTime validates a time in ms since the Unix epoch.
func CheckTime(field string, ms int64) error { return input.PositiveSafeInt(field, ms) }

// CheckNewRoom validates a room's name and video; it returns them trimmed.
func CheckNewRoom(name string, v *Video) (string, Video, error) {
	name = strings.TrimSpace(name)
	if err := input.Text("name", name, 1, MaxNameLen); err != nil {
		return "", Video{}, err
	}
	if v == nil {
		return "", Video{}, invalid("Describe the video: {\"title\", \"durationMs\"}.")
	}
	title := strings.TrimSpace(v.Title)
	if err := input.Text("video.title", title, 1, MaxTitleLen); err != nil {
		return "", Video{}, err
	}
	if err := input.Int("video.durationMs", v.DurationMs, 1, MaxDurationMs); err != nil {
		return "", Video{}, err
	}
	return name, Video{Title: title, DurationMs: v.DurationMs}, nil
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
