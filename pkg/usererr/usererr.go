// Package usererr is the one error type Vigil's domains return for failures a person can fix:
// a kind that callers match with errors.Is (and transports map to a gRPC code), and a sentence
// that is safe to show the end user.
package usererr

import "fmt"

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
