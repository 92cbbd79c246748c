package redisx

import "context"

// ScriptOf exposes scriptOf to the external tests.
var ScriptOf = scriptOf

// HashOf is s's SHA1, for the external tests.
func HashOf(s *Script) string { return s.s.Hash() }

// WithRoundFinished returns ctx carrying f, which the durability hook calls once the round of
// barrier and WAIT that a call with ctx ran has its outcome, before the round queued behind it
// starts.
func WithRoundFinished(ctx context.Context, f func()) context.Context {
	return context.WithValue(ctx, roundFinishedKey{}, f)
}

// RoundRunners is how many goroutines run queued rounds now.
func RoundRunners() int64 { return roundRunners.Load() }

// WithRoundJoined returns ctx carrying f, which the durability hook calls once a call with ctx
// has joined a round run by another call.
func WithRoundJoined(ctx context.Context, f func()) context.Context {
	return context.WithValue(ctx, roundJoinedKey{}, f)
}
