// Package domain is the room's pure logic: roles, the leader's control frames and their limits,
// the occupancy rule, and the typed errors the transport maps to gRPC codes. The Lua scripts in
// internal/store are the production form of the occupancy rule; Occupancy here is its Go twin.
package domain

import (
	"regexp"

	"github.com/vigil-dev/vigil/pkg/input"
	"github.com/vigil-dev/vigil/pkg/usererr"
)

// Errors the transport maps to gRPC codes (in one function).
var (
	// ErrInvalid marks bad input.
	ErrInvalid = usererr.ErrInvalid
	// ErrNotFound marks a room that does not exist (or has ended).
	ErrNotFound = usererr.ErrNotFound
	// ErrUnauthenticated marks a leader without the room's token.
	ErrUnauthenticated = usererr.ErrUnauthenticated
	// ErrForbidden marks a control frame from a viewer.
	ErrForbidden = usererr.ErrDenied
)

// UserError is an error with a sentence a person can act on (shared by every domain).
type UserError = usererr.Error

var userErr = usererr.New

// NotFound is the error for a room that is not open.
func NotFound(code string) error {
	return userErr(ErrNotFound, "No open room %q.", code)
}

// Unauthenticated is the error for a missing or wrong leader token.
func Unauthenticated() error {
	return userErr(ErrUnauthenticated, "Only the room's leader may do that: send the leader token.")
}

// ViewerControl is the error for a control frame sent by a viewer.
func ViewerControl(kind string) error {
	return userErr(ErrForbidden, "Only the leader can send %s frames.", kind)
}

// SessionTaken is the error for a hello whose session id is open for another role or client.
func SessionTaken() error {
	return userErr(ErrInvalid, "That session id is in use by another client; open a new session.")
}

// SessionLapsed is the error for a control frame of a session that is no longer open.
func SessionLapsed() error {
	return userErr(ErrInvalid, "Your session lapsed; reconnect.")
}

// Role of a session.
type Role string

// Roles.
const (
	Leader Role = "l"
	Viewer Role = "v"
)

// Limits of the input.
const (
	MaxClientIDLen    = 64
	MaxPositionMs     = 24 * 60 * 60 * 1000
	MaxLabelLen       = 100
	MaxFormationBytes = 16 << 10
	// MaxMarks is how many marks a room holds; one more is refused.
	MaxMarks    = 200
	MaxTitleLen = 200
)

// CheckCode validates a room code: the shared slug rule.
func CheckCode(code string) error { return input.Slug("room code", code) }

// CheckClientID validates a client id: 1-64 characters without control characters.
func CheckClientID(id string) error { return input.Text("clientId", id, 1, MaxClientIDLen) }

var sessionIDPattern = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// CheckSessionID validates a caller-chosen session id: 1-64 letters, digits, '_' or '-'.
func CheckSessionID(id string) error {
	if !sessionIDPattern.MatchString(id) {
		return userErr(ErrInvalid, "sessionId must be 1-64 letters, digits, '_' or '-'.")
	}
	return nil
}

// CheckRef validates a control frame's ref: 0 (none) through 2^53-1.
func CheckRef(ref int64) error {
	return input.Int("ref", ref, 0, input.MaxSafeInt)
}

// CheckPosition validates a playback or mark position.
func CheckPosition(ms int64) error { return input.Int("positionMs", ms, 0, MaxPositionMs) }

// CheckLabel validates a mark's label.
func CheckLabel(label string) error { return input.Text("label", label, 0, MaxLabelLen) }

// CheckFormation validates the size of a formation's JSON and, when it lists dancers, their
// number.
func CheckFormation(json []byte) error {
	if len(json) > MaxFormationBytes {
		return userErr(ErrInvalid, "A formation must be at most %d KiB of JSON.", MaxFormationBytes>>10)
	}
	return CheckDancers(json)
}

// CheckVideo validates a reloaded video.
func CheckVideo(title string, durationMs int64) error {
	if err := input.Text("video.title", title, 1, MaxTitleLen); err != nil {
		return err
	}
	return input.Int("video.durationMs", durationMs, 1, MaxPositionMs)
}

// Control kinds.
const (
	KindSync      = "sync"
	KindFormation = "formation"
	KindMark      = "mark"
	KindReload    = "reload"
)

// Video is what a room practises with.
type Video struct {
	Title      string
	DurationMs int64
}

// Control is one control frame of a session, before the service stamps it.
type Control struct {
	// Kind is sync, formation, mark, reload, loop or markFormation ("" for anything else).
	Kind string
	// Ref is the caller's number for it (0: none), increasing per session.
	Ref int64
	// Playing and PositionMs (sync); PositionMs and Label (mark); PositionMs (markFormation).
	Playing    bool
	PositionMs int64
	Label      string
	// Rate is the sync's playback rate as sent (0: 1x); RateCenti is it in hundredths once
	// checked.
	Rate      float64
	RateCenti int64
	// CountIn starts a sync's playback after a count (nil: at once).
	CountIn *CountIn
	// Formation is the formation's JSON (formation, markFormation).
	Formation []byte
	// Video switches the room's video (reload; nil reloads the same one).
	Video *Video
	// Loop is the A-B loop (loop; the zero Loop clears it).
	Loop Loop
}

// CheckControl validates a control frame (and fills in a sync's RateCenti).
func CheckControl(c *Control) error {
	if err := CheckRef(c.Ref); err != nil {
		return err
	}
	switch c.Kind {
	case KindSync:
		if err := CheckPosition(c.PositionMs); err != nil {
			return err
		}
		r, err := RateCenti(c.Rate)
		if err != nil {
			return err
		}
		c.RateCenti = r
		return CheckCountIn(c.CountIn, c.Playing)
	case KindLoop:
		return CheckLoop(c.Loop)
	case KindMarkFormation:
		if err := CheckPosition(c.PositionMs); err != nil {
			return err
		}
		return CheckMarkFormation(c.Formation)
	case KindFormation:
		return CheckFormation(c.Formation)
	case KindMark:
		if err := CheckPosition(c.PositionMs); err != nil {
			return err
		}
		return CheckLabel(c.Label)
	case KindReload:
		if c.Video != nil {
			return CheckVideo(c.Video.Title, c.Video.DurationMs)
		}
		return nil
	}
	return Invalid(ControlKinds)
}

// ControlKinds is the sentence that refuses a frame of no known kind.
const ControlKinds = "Send a sync, formation, mark, reload, loop or markFormation frame."

// Invalid is an ErrInvalid with msg.
func Invalid(msg string) error { return userErr(ErrInvalid, "%s", msg) }

// Session is one open socket of a room, as occupancy sees it.
type Session struct {
	Role     Role
	ClientID string
	// Closing sessions are already out of the count.
	Closing bool
	// LeaseUntil (ms): a session whose lease has ended (its replica died) no longer counts.
	LeaseUntil int64
}

// Occupancy is the rule the store's scripts implement: viewers are the distinct client ids of
// the open viewer sessions whose lease has not ended; the leader is present while one of its
// sessions is. The leader is never a viewer.
func Occupancy(sessions []Session, now int64) (viewers int, leaderPresent bool) {
	ids := map[string]bool{}
	for _, s := range sessions {
		if s.Closing || s.LeaseUntil <= now {
			continue
		}
		switch s.Role {
		case Leader:
			leaderPresent = true
		case Viewer:
			ids[s.ClientID] = true
		}
	}
	return len(ids), leaderPresent
}

// End reasons, as sockets are closed with them.
const (
	ReasonExpired = "expired"
	ReasonEnded   = "ended"
)
