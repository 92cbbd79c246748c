// Package domain holds the chat rules, free of Redis and gRPC: what a room name, a user and a
// message body may be, and the errors callers can act on.
package domain

import (
	"errors"
	"fmt"
	"regexp"
	"unicode"
	"unicode/utf8"

	"github.com/vigil-dev/vigil/pkg/usererr"
)

// Limits of the chat contract (docs/API.md).
const (
	// MaxBody is the longest message body, in characters (Unicode code points).
	MaxBody = 4096
	// MaxUserID is the longest user id, in characters.
	MaxUserID = 128
	// MaxUsername is the longest display name, in characters.
	MaxUsername = 64
	// MaxPostID is the longest idempotency key, in bytes.
	MaxPostID = 128
	// MaxPage is the most messages one history page holds.
	MaxPage = 1000
)

// Message is one stored message of a room.
type Message struct {
	// ID is the room's sequence number for the message: 1, 2, 3, … with no gaps.
	ID int64
	// UserID is the sender's id; User its display name.
	UserID, User string
	// Body is 1 through MaxBody characters.
	Body string
	// TS is when the service stored it, in ms since the Unix epoch.
	TS int64
}

// Post is a message to append, before it has an id.
type Post struct {
	Room   string
	UserID string
	User   string
	Body   string
	// PostID is an optional idempotency key: a post repeated with it is stored once.
	PostID string
}

// Errors callers can test with errors.Is. Each is wrapped in a UserError with a sentence meant
// for the end user.
var (
	// ErrInvalid marks bad input.
	ErrInvalid = errors.New("invalid input")
)

// UserError is an error with a sentence a person can act on (shared by every domain).
type UserError = usererr.Error

func invalid(format string, args ...any) error {
	return &UserError{Kind: ErrInvalid, Msg: fmt.Sprintf(format, args...)}
}

var roomPattern = regexp.MustCompile(`^[a-z0-9](?:[a-z0-9-]{1,38}[a-z0-9])$`)

// ValidateRoom checks a room name against the name rule of docs/API.md.
func ValidateRoom(room string) error {
	if !roomPattern.MatchString(room) {
		return invalid("Use a lowercase room name containing 3-40 letters, digits, or hyphens.")
	}
	return nil
}

// ValidatePost checks a post and fills its defaults (the display name defaults to the user id).
func ValidatePost(p *Post) error {
	if err := ValidateRoom(p.Room); err != nil {
		return err
	}
	if !printable(p.UserID, 1, MaxUserID) {
		return invalid("userId must be 1 to %d printable characters.", MaxUserID)
	}
	if p.User == "" {
		p.User = p.UserID
		if utf8.RuneCountInString(p.User) > MaxUsername {
			p.User = string([]rune(p.User)[:MaxUsername])
		}
	}
	if !printable(p.User, 1, MaxUsername) {
		return invalid("username must be 1 to %d printable characters.", MaxUsername)
	}
	if !utf8.ValidString(p.Body) {
		return invalid("body must be valid UTF-8 text.")
	}
	if n := utf8.RuneCountInString(p.Body); n < 1 || n > MaxBody {
		return invalid("body must be 1 to %d characters.", MaxBody)
	}
	if len(p.PostID) > MaxPostID {
		return invalid("postId must be at most %d characters.", MaxPostID)
	}
	return nil
}

// printable reports whether s is valid UTF-8 of min..max characters without control characters.
func printable(s string, min, max int) bool {
	if !utf8.ValidString(s) {
		return false
	}
	n := 0
	for _, r := range s {
		if unicode.IsControl(r) {
			return false
		}
		n++
	}
	return n >= min && n <= max
}

// Page says which part of a room's history to read. At most one of Before and Since is set.
type Page struct {
	// Limit is 1 through MaxPage.
	Limit int
	// Before, when positive, asks for the newest messages with a smaller id.
	Before int64
	// Since, when non-negative and HasSince, asks for the oldest messages with a greater id.
	Since    int64
	HasSince bool
}

// ValidatePage checks a page request; limit 0 means def.
func ValidatePage(limit int, before, since *int64, def int) (Page, error) {
	p := Page{Limit: limit}
	if p.Limit == 0 {
		p.Limit = def
	}
	if p.Limit < 1 || p.Limit > MaxPage {
		return p, invalid("limit must be an integer from 1 through %d.", MaxPage)
	}
	if before != nil && since != nil {
		return p, invalid("Give before or since, not both.")
	}
	if before != nil {
		if *before < 1 {
			return p, invalid("before must be a positive integer message id.")
		}
		p.Before = *before
	}
	if since != nil {
		if *since < 0 {
			return p, invalid("since must be a message id, 0 or more.")
		}
		p.Since, p.HasSince = *since, true
	}
	return p, nil
}
