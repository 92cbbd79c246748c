package domain

import (
	"regexp"
	"sort"

	"github.com/vigil-dev/vigil/pkg/input"
	"github.com/vigil-dev/vigil/pkg/usererr"
)

// Who is here. A member is a user id: the user's first open session (one socket) makes them
// present under that session's username, and their last one to close makes them leave, so a
// second socket of the same user is not a second arrival. Each arrival and departure adds one
// to the room's presence version.

// MaxSessionID is the longest session id, in bytes.
const MaxSessionID = 128

// sessionIDPattern is what a session id may hold: no tab (the store's separator) and nothing
// a person types, since the caller (the gateway) makes them up.
var sessionIDPattern = regexp.MustCompile(`^[A-Za-z0-9_.:-]{1,128}$`)

// Session is one member's socket, as its gateway announces it.
type Session struct {
	// ID is chosen by the gateway, unique among its sessions.
	ID string
	// UserID is the member; Username the name it shows when this session is their first.
	UserID, Username string
}

// Member is a user present in a room.
type Member struct {
	UserID, Username string
	// Since is when the member arrived, in ms since the Unix epoch.
	Since int64
	// Order is the presence version of the member's arrival: members list in this order.
	Order int64
}

// Presence is a room's members, in order of arrival, at a version.
type Presence struct {
	Members []Member
	// Version is the room's presence version: each arrival and departure adds one.
	Version int64
}

// Sort puts the members in order of arrival.
func (p *Presence) Sort() {
	sort.Slice(p.Members, func(i, j int) bool { return p.Members[i].Order < p.Members[j].Order })
}

// Change is one arrival (Joined set) or departure (Left set) at a presence version.
type Change struct {
	Version int64
	Joined  *Member
	Left    string
}

// ErrSessionTaken refuses an Enter whose session id is open for another user.
var ErrSessionTaken = usererr.Invalid("This session id is open for another user; give each socket its own session id.")

// ValidateSession checks an announced session and fills its default username.
func ValidateSession(s *Session) error {
	if !sessionIDPattern.MatchString(s.ID) {
		return usererr.Invalid("sessionId must be 1 to %d characters of letters, digits, '_', '.', ':' or '-'.", MaxSessionID)
	}
	if err := input.Text("userId", s.UserID, 1, MaxUserID); err != nil {
		return err
	}
	if s.Username == "" {
		s.Username = DefaultUsername
	}
	return input.Text("username", s.Username, 1, MaxUsername)
}

// ValidateSessionID checks the id of a session to close.
func ValidateSessionID(id string) error {
	if !sessionIDPattern.MatchString(id) {
		return usererr.Invalid("sessionId must be 1 to %d characters of letters, digits, '_', '.', ':' or '-'.", MaxSessionID)
	}
	return nil
}
