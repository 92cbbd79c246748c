package rest

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/vigil-dev/vigil/pkg/usererr"
)

// TestUnavailableKeepsAStoreSentence: a service's UNAVAILABLE with a sentence of its own (a
// write the store refused, a write whose outcome is unknown) reaches the REST caller as 503
// with that sentence; any other UNAVAILABLE (a gRPC transport's, with internals) gets the
// generic one.
func TestUnavailableKeepsAStoreSentence(t *testing.T) {
	relay := New(nil, slog.New(slog.DiscardHandler), 1<<20)
	tests := []struct {
		err  error
		want string
	}{
		{usererr.ErrNotApplied, usererr.ErrNotApplied.Msg},
		{usererr.ErrOutcomeUnknown, usererr.ErrOutcomeUnknown.Msg},
		{errors.New("dial tcp 10.0.0.7:6379: connection refused"), "A backend service is unavailable; try again shortly."},
	}
	for _, tt := range tests {
		rec := httptest.NewRecorder()
		relay.WriteRPCError(rec, httptest.NewRequest(http.MethodPost, "/v1/x", nil), usererr.Status(context.Background(), nil, "test store", tt.err))
		if rec.Code != http.StatusServiceUnavailable || !strings.Contains(rec.Body.String(), tt.want) || rec.Header().Get("Retry-After") == "" {
			t.Errorf("WriteRPCError(%v) = %d %s (Retry-After %q), want 503 with %q", tt.err, rec.Code, rec.Body, rec.Header().Get("Retry-After"), tt.want)
		}
	}
}
