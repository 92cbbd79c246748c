package domain

import (
	"errors"
	"time"
)

// The room's stored state as the use cases see it: what the store keeps and answers, in plain
// Go (internal/store is its Redis form).

// ErrEnded is returned for a room that has ended; Reason says why.
type ErrEnded struct{ Reason string }

func (e *ErrEnded) Error() string { return "room ended: " + e.Reason }

// ErrNoState is returned when the room has no state here.
var ErrNoState = errors.New("room has no state")

// ErrTombstoned is returned by Init for a room whose storage was deleted.
var ErrTombstoned = errors.New("room was deleted")

// ErrSessionTaken is returned by Join when the session id is open for another role or client.
var ErrSessionTaken = errors.New("session id is open for another role or client")

// ErrSessionClosed is returned by Act when the acting session is not open (its lease ended).
var ErrSessionClosed = errors.New("session is not open")

// Seed is what a room's state starts from: its Lobby entry.
type Seed struct {
	LastActivity, CreatedAt time.Time
	Title                   string
	DurationMs              int64
}

// Change is an occupancy change for the Lobby: Seq is 0 when nothing changed.
type Change struct {
	Seq                        int64
	ViewersDelta, LeadersDelta int32
}

// State is a room's state as a joiner receives it.
type State struct {
	Playing       bool
	PositionMs    int64
	At            int64
	FormationJSON string // "" when unset
	Title         string
	DurationMs    int64
	Viewers       int32
	Leaders       int32
	Version       int64
	Marks         []string // each mark's wire form (roomv1.Mark), oldest first
	// RateCenti is the playback rate in hundredths (100 when never set).
	RateCenti int64
	// CountIn is the count-in playback started with (zero: none).
	CountIn CountIn
	// Loop is the A-B loop (zero: none).
	Loop Loop
	// MarkFormations are the marks' formations (JSON) by position; marks without one are
	// absent.
	MarkFormations map[int64]string
	// People present, in order of arrival.
	People []Person
}

// Attached names an open session and the stream it is attached to.
type Attached struct {
	ID       string
	Role     Role
	ClientID string
	// Attachment identifies the stream holding the session; Leave closes the session only for
	// the stream it is attached to now.
	Attachment string
	// Name is the person's name, kept when this session is their first.
	Name string
}

// Joined is what Join answers: the state for the joiner, the occupancy change for the Lobby,
// whether the session was re-attached, and the last control ref applied for it.
type Joined struct {
	State   State
	Change  Change
	Resumed bool
	LastRef int64
}

// Action is one leader action as act.lua takes it.
type Action struct {
	// Kind is sync, formation, mark or reload.
	Kind string
	// Frame is the stamped frame every replica relays (an encoded roomv1.JoinResponse).
	Frame []byte
	// Session is the acting session's id; it must be open.
	Session string
	// Ref is the caller's number for the action, increasing per session (0: none). An action
	// whose ref is at or below the session's last applied one is a repeat and is not applied.
	Ref int64
	// Args are the kind's ARGV[9..] (see act.lua): sync: playing 0/1, positionMs, rate in
	// hundredths, count-in beats, bpm (0 0: none); formation: its JSON; mark: the mark's wire
	// form, positionMs; reload: 0, or 1, title, durationMs; loop: startMs, endMs (0 0: clear);
	// markFormation: positionMs, its JSON ("" clears it).
	Args []any
}

// ActRefusal is why the store refused an action on the room's state (nothing was applied).
type ActRefusal struct {
	// Err is the sentence: TooManyMarks, NoMarkAt or LoopOutside.
	Err error
}

func (e *ActRefusal) Error() string { return e.Err.Error() }

func (e *ActRefusal) Unwrap() error { return e.Err }

// Renewal is one room's lease renewal: the sessions this replica holds in it, and (after
// RenewAll) what the store said.
type Renewal struct {
	Code string
	IDs  []string
	// Missing are the sessions no longer open (swept after their lease ended).
	Missing []string
	// Err is ErrNoState or *ErrEnded when the room is gone or ended, or a store error.
	Err error
}

// SweepOutcome is what the alarm's transition found.
type SweepOutcome int

// Sweep outcomes.
const (
	// Gone: the room has no state; nothing to do.
	Gone SweepOutcome = iota
	// Active: the room is in use; its alarm is re-armed.
	Active
	// Ending: the room has ended (now or earlier); finish its clean-up.
	Ending
)
