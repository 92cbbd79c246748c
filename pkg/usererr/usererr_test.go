package usererr

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

func TestStatus(t *testing.T) {
	domainConflict := fmt.Errorf("reservation status conflict: %w", ErrConflict)
	storeDown := errors.New("dial tcp 10.0.0.1:6379: connection refused")
	tests := []struct {
		err      error
		wantCode codes.Code
		wantMsg  string
	}{
		{Invalid("ttlSeconds must be an integer from %d through %d.", 5, 3600), codes.InvalidArgument, "ttlSeconds must be an integer from 5 through 3600."},
		{New(ErrNotFound, "Reservation a does not exist; create it first."), codes.NotFound, "Reservation a does not exist; create it first."},
		{New(domainConflict, "It expired."), codes.FailedPrecondition, "It expired."},
		{fmt.Errorf("wrapped: %w", New(ErrExhausted, "Too many waiters.")), codes.ResourceExhausted, "Too many waiters."},
		{context.Canceled, codes.Canceled, "request cancelled"},
		{fmt.Errorf("eval: %w", context.DeadlineExceeded), codes.DeadlineExceeded, "request timed out"},
		{status.Error(codes.Aborted, "already a status"), codes.Aborted, "already a status"},
		{storeDown, codes.Unavailable, "the test store is unavailable; try again"},
		{fmt.Errorf("create: %w", ErrNotApplied), codes.Unavailable, ErrNotApplied.Msg},
		{fmt.Errorf("create: %w", ErrOutcomeUnknown), codes.Unavailable, ErrOutcomeUnknown.Msg},
	}
	for _, tt := range tests {
		st := status.Convert(Status(context.Background(), nil, "test store", tt.err))
		if st.Code() != tt.wantCode || st.Message() != tt.wantMsg {
			t.Errorf("Status(%v) = %v %q, want %v %q", tt.err, st.Code(), st.Message(), tt.wantCode, tt.wantMsg)
		}
	}
	for _, err := range []error{ErrNotApplied, fmt.Errorf("post: %w", ErrOutcomeUnknown)} {
		if st := status.Convert(Status(context.Background(), nil, "test store", err)); !ForUser(st) {
			t.Errorf("Status(%v) is not marked ForUser: an edge would hide its sentence", err)
		}
	}
	if st := status.Convert(Status(context.Background(), nil, "test store", storeDown)); ForUser(st) {
		t.Errorf("Status(%v) is marked ForUser: an edge would show internals", storeDown)
	}
	if Status(context.Background(), nil, "x", nil) != nil {
		t.Error("Status(nil) is not nil")
	}
}
