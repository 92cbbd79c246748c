// Package usererr is the one error type Vigil's domains return for failures a person can fix:
// a kind that callers match with errors.Is, a sentence that is safe to show the end user, and
// the one mapping from those kinds to gRPC status codes (Status) that every service's
// transport uses.
package usererr

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// sentenceDomain marks a status whose message is an *Error's sentence (ErrorInfo.Domain), for
// the codes whose message an edge otherwise replaces: UNAVAILABLE also comes from gRPC itself
// (a refused dial, a closed transport), whose messages are internals.
const sentenceDomain = "usererr.vigil.dev"

// forUser is a status of code with msg, marked as a sentence for the user.
func forUser(code codes.Code, msg string) error {
	st := status.New(code, msg)
	if marked, err := st.WithDetails(&errdetails.ErrorInfo{Reason: "USER_SENTENCE", Domain: sentenceDomain}); err == nil {
		st = marked
	}
	return st.Err()
}

// ForUser reports whether st's message is a sentence a service wrote for the user (an
// *Error's), which an edge shows as it is even where the code is UNAVAILABLE.
func ForUser(st *status.Status) bool {
	for _, d := range st.Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok && info.GetDomain() == sentenceDomain {
			return true
		}
	}
	return false
}

// Error is an error with a sentence a person can act on.
type Error struct {
	// Kind is the sentinel the transport maps to a status code.
	Kind error
	// Msg is the sentence shown to the user.
	Msg string
}

func (e *Error) Error() string { return e.Msg }

// Unwrap lets errors.Is match the kind.
func (e *Error) Unwrap() error { return e.Kind }

// New is an *Error of kind with a formatted sentence.
func New(kind error, format string, args ...any) error {
	return &Error{Kind: kind, Msg: fmt.Sprintf(format, args...)}
}

// The kinds every domain shares. A domain may alias them (domain.ErrInvalid = usererr.ErrInvalid)
// or wrap them in a sentinel of its own with fmt.Errorf("...: %w", usererr.ErrConflict).
var (
	// ErrInvalid is bad input: InvalidArgument.
	ErrInvalid = errors.New("invalid input")
	// ErrNotFound is a named object that does not exist: NotFound.
	ErrNotFound = errors.New("not found")
	// ErrConflict is a transition the object's state forbids: FailedPrecondition.
	ErrConflict = errors.New("state conflict")
	// ErrExists is a create of something that already exists: AlreadyExists.
	ErrExists = errors.New("already exists")
	// ErrExhausted is a limit that was hit; trying later may work: ResourceExhausted.
	ErrExhausted = errors.New("limit reached")
	// ErrDenied is a caller without the right to do this: PermissionDenied.
	ErrDenied = errors.New("permission denied")
	// ErrUnauthenticated is a caller who did not prove who they are (a missing or wrong
	// token): Unauthenticated.
	ErrUnauthenticated = errors.New("unauthenticated")
	// ErrUnavailable is a dependency or replica that cannot serve now: Unavailable.
	ErrUnavailable = errors.New("unavailable")
)

// The two ways a write can fail against a replicated store, each an ErrUnavailable
// (UNAVAILABLE, 503) with a sentence of its own: what the caller may do differs. pkg/redisx
// returns them (redisx.ErrNotApplied, redisx.ErrOutcomeUnknown); a domain that can say more
// (which request to repeat) wraps them in an *Error of its own kind ErrUnavailable.
var (
	// ErrNotApplied is a write the store refused before making it: its primary is cut off
	// from its replicas, or is no longer the primary. Sending the same request again is safe.
	ErrNotApplied = &Error{Kind: ErrUnavailable, Msg: "The store refused the change (its primary is cut off from its replicas " +
		"or is no longer the primary) and nothing was changed; send the same request again in a few seconds."}
	// ErrOutcomeUnknown is a write the store's primary applied but did not confirm, in time,
	// to be on a replica (or on disk): it may or may not survive a failover. Sending the same
	// request again (the same ids) tells which.
	ErrOutcomeUnknown = &Error{Kind: ErrUnavailable, Msg: "The store did not confirm in time that the change reached a replica, " +
		"so its outcome is unknown; send the same request again, with the same ids, to learn it."}
)

// Invalid is an ErrInvalid with a formatted sentence.
func Invalid(format string, args ...any) error { return New(ErrInvalid, format, args...) }

// kindCodes is the gRPC code of each shared kind, and of a context's end, in the order Code
// tries them.
var kindCodes = []struct {
	kind error
	code codes.Code
}{
	{ErrInvalid, codes.InvalidArgument},
	{ErrNotFound, codes.NotFound},
	{ErrConflict, codes.FailedPrecondition},
	{ErrExists, codes.AlreadyExists},
	{ErrExhausted, codes.ResourceExhausted},
	{ErrDenied, codes.PermissionDenied},
	{ErrUnauthenticated, codes.Unauthenticated},
	{ErrUnavailable, codes.Unavailable},
	{context.Canceled, codes.Canceled},
	{context.DeadlineExceeded, codes.DeadlineExceeded},
}

// Code is the gRPC code for err's kind, and false when err has none of the shared kinds.
func Code(err error) (codes.Code, bool) {
	for _, k := range kindCodes {
		if errors.Is(err, k.kind) {
			return k.code, true
		}
	}
	return codes.Unknown, false
}

// Status maps err to a gRPC status error for a client. An *Error keeps its sentence; a
// cancelled or timed-out call says so; an error already carrying a status passes through;
// anything else is an internal failure: it is logged on log with the event "store_error" and
// the client reads only "the <store> is unavailable; try again" (store is e.g. "locks store").
func Status(ctx context.Context, log *slog.Logger, store string, err error) error {
	if err == nil {
		return nil
	}
	if code, ok := Code(err); ok {
		var ue *Error
		switch {
		case errors.As(err, &ue) && code == codes.Unavailable:
			return forUser(code, ue.Msg)
		case errors.As(err, &ue):
			return status.Error(code, ue.Msg)
		case code == codes.Canceled:
			return status.Error(code, "request cancelled")
		case code == codes.DeadlineExceeded:
			return status.Error(code, "request timed out")
		}
		return status.Error(code, err.Error())
	}
	if _, ok := status.FromError(err); ok {
		return err
	}
	if log != nil {
		log.ErrorContext(ctx, store+" failed", "event", "store_error", "err", err)
	}
	return status.Errorf(codes.Unavailable, "the %s is unavailable; try again", store)
}
