// Package domain holds the chat rules, free of Redis and gRPC: what a room name, a user and a
// message body may be, and the errors callers can act on.
package domain

import (
	"unicode/utf8"

	"github.com/vigil-dev/vigil/pkg/input"
	"github.com/vigil-dev/vigil/pkg/usererr"
)

// Limits of the chat contract (docs/API.md).
const (
	// MaxRoom is the longest room name, in bytes. A room name is any UTF-8 without control
	// characters ("general", "orders/42", "日報", "{team}").
	MaxRoom = 128
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
	// DefaultUsername is the display name of a post that gives none (the seed's 익명).
	DefaultUsername = "anonymous"
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

// ErrInvalid marks bad input (usererr's kind, so usererr.Status maps it).
var ErrInvalid = usererr.ErrInvalid

// ValidateRoom checks a room name: 1 through MaxRoom bytes of UTF-8 without control characters.
func ValidateRoom(room string) error { return input.Name("room", room, MaxRoom) }

// ValidatePost checks a post and fills its default display name. The caller gives a post
// without a user id one first (the app makes it a UUID).
func ValidatePost(p *Post) error {
	if err := ValidateRoom(p.Room); err != nil {
		return err
	}
	if err := input.Text("userId", p.UserID, 1, MaxUserID); err != nil {
		return err
	}
	if p.User == "" {
		p.User = DefaultUsername
	}
	if err := input.Text("username", p.User, 1, MaxUsername); err != nil {
		return err
	}
	// A body is free text: newlines and tabs are part of a message.
	if !utf8.ValidString(p.Body) {
		return usererr.Invalid("body must be valid UTF-8 text.")
	}
	if n := utf8.RuneCountInString(p.Body); n < 1 || n > MaxBody {
		return usererr.Invalid("body must be 1 to %d characters.", MaxBody)
	}
	if len(p.PostID) > MaxPostID {
		return usererr.Invalid("postId must be at most %d characters.", MaxPostID)
	}
	return nil
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

// ValidatePage checks a page request; limit 0 means def. Ids are safe integers (JSON numbers a
// browser holds exactly).
func ValidatePage(limit int, before, since *int64, def int) (Page, error) {
	p := Page{Limit: limit}
	if p.Limit == 0 {
		p.Limit = def
	}
	if p.Limit < 1 || p.Limit > MaxPage {
		return p, usererr.Invalid("limit must be an integer from 1 through %d.", MaxPage)
	}
	if before != nil && since != nil {
		return p, usererr.Invalid("Give before or since, not both.")
	}
	if before != nil {
		if err := input.PositiveSafeInt("before", *before); err != nil {
			return p, err
		}
		p.Before = *before
	}
	if since != nil {
		if err := ValidateSince(*since); err != nil {
			return p, err
		}
		p.Since, p.HasSince = *since, true
	}
	return p, nil
}

// ValidateSince checks a resume point: a message id, 0 or more.
func ValidateSince(since int64) error { return input.Int("since", since, 0, input.MaxSafeInt) }
