// Package rest is the gateway's REST side: the grpc-gateway runtime in the API's JSON dialect,
// the unary routes that skip it, the lock relay, the lobby's room list and the operators'
// routes. It registers routes on a Mux it is given and reaches backends through the clients it
// is given; it knows nothing of sockets, keys or the list of domains.
package rest

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"

	"github.com/grpc-ecosystem/grpc-gateway/v2/runtime"
	"github.com/grpc-ecosystem/grpc-gateway/v2/utilities"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/vigil-dev/vigil/gateway/jsonapi"
	"github.com/vigil-dev/vigil/pkg/usererr"
)

// Mux is where a part registers its routes: the gateway's router, which guards each pattern
// with the scope its table gives it (and refuses a pattern without one).
type Mux interface {
	Handle(pattern string, h http.Handler)
}

// Relay is one gateway's REST dialect: how bodies are bounded and read, how answers and
// errors are written.
type Relay struct {
	json     *jsonapi.Dialect
	log      *slog.Logger
	maxBody  int64
	tooLarge string
}

// New makes the REST dialect of a gateway: json reads and writes the bodies, log records
// backend failures, maxBodyBytes bounds a request body (larger gets 413).
func New(json *jsonapi.Dialect, log *slog.Logger, maxBodyBytes int64) *Relay {
	return &Relay{
		json: json, log: log, maxBody: maxBodyBytes,
		tooLarge: fmt.Sprintf("The request body is larger than %d KiB; send a smaller one.", maxBodyBytes>>10),
	}
}

// Runtime is a grpc-gateway mux in the API's dialect: successCodes maps full RPC method names
// to the HTTP status of their success (201, 204), 200 otherwise.
func (s *Relay) Runtime(successCodes map[string]int) *runtime.ServeMux {
	// Every runtime call is unary: the backend connections give each backend.CallTimeout.
	return runtime.NewServeMux(
		runtime.WithMarshalerOption(runtime.MIMEWildcard, s.json),
		runtime.WithErrorHandler(func(ctx context.Context, _ *runtime.ServeMux, _ runtime.Marshaler, w http.ResponseWriter, r *http.Request, err error) {
			s.WriteRPCError(w, r.WithContext(ctx), err)
		}),
		runtime.WithRoutingErrorHandler(routingError),
		// Path parameters are names as people write them, percent-encoded in the path:
		// /locks/orders%2F42/acquire is the lock "orders/42". In this mode the raw path is split
		// on "/" only, and a one-segment parameter is fully unescaped (AllCharacters would split
		// on "%2F" too).
		runtime.WithUnescapingMode(runtime.UnescapingModeAllExceptReserved),
		runtime.WithForwardResponseOption(func(ctx context.Context, w http.ResponseWriter, _ proto.Message) error {
			if meth, ok := runtime.RPCMethod(ctx); ok {
				if code, ok := successCodes[meth]; ok {
					w.WriteHeader(code)
				}
			}
			return nil
		}),
	)
}

// CheckQuery guards a runtime route whose request message (of type req) takes query
// parameters: its integer parameters follow the body's rules (jsonapi.Dialect.CheckQuery), and
// a parameter the runtime could not parse is refused with a sentence, before the runtime sees
// the request. (grpc-gateway keeps one query parser for the whole process; the check is here,
// per gateway, instead of replacing that.)
func (s *Relay) CheckQuery(req protoreflect.MessageType, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.RawQuery != "" {
			values := r.URL.Query()
			msg := req.New().Interface()
			if err := s.json.CheckQuery(msg, values); err != nil {
				s.WriteRPCError(w, r, status.Error(codes.InvalidArgument, err.Error()))
				return
			}
			if err := (&runtime.DefaultQueryParser{}).Parse(msg, values, utilities.NewDoubleArray(nil)); err != nil {
				s.WriteRPCError(w, r, status.Error(codes.InvalidArgument, "Check the query parameters: "+err.Error()+"."))
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}

// WriteRPCError maps a gRPC status to HTTP. Services write user-facing messages for client
// errors; server-side failures get a generic sentence so internals never leak.
func (s *Relay) WriteRPCError(w http.ResponseWriter, r *http.Request, err error) {
	st := status.Convert(err)
	code := runtime.HTTPStatusFromCode(st.Code())
	msg := st.Message()
	switch st.Code() {
	case codes.FailedPrecondition:
		// The object's state forbids the call (confirming an expired hold): a conflict.
		code = http.StatusConflict
	case codes.Unavailable:
		if !usererr.ForUser(st) {
			// A service's own sentence (a store write refused, or its outcome unknown) is kept.
			msg = "A backend service is unavailable; try again shortly."
		}
		w.Header().Set("Retry-After", "1")
	case codes.DeadlineExceeded:
		msg = "The request timed out; try again."
		if r.Context().Err() == nil {
			// The gateway's own deadline (backend.CallTimeout), not the caller's: the backend
			// did not answer (a paused replica, a partition), which is its being unavailable.
			code, msg = http.StatusServiceUnavailable, "A backend service did not answer in time; try again shortly."
			w.Header().Set("Retry-After", "1")
		}
	case codes.Internal, codes.Unknown, codes.DataLoss:
		s.log.ErrorContext(r.Context(), "backend error", "event", "http_error", "path", r.URL.Path, "code", st.Code().String(), "err", st.Message())
		msg = "Internal error."
	case codes.Unimplemented:
		code, msg = http.StatusNotFound, "Not found."
	}
	if msg == "" {
		msg = http.StatusText(code) + "."
	}
	jsonapi.WriteError(w, code, msg)
}

func routingError(_ context.Context, _ *runtime.ServeMux, _ runtime.Marshaler, w http.ResponseWriter, r *http.Request, code int) {
	switch code {
	case http.StatusMethodNotAllowed:
		jsonapi.WriteError(w, code, "Method not allowed.")
	case http.StatusNotFound:
		jsonapi.WriteError(w, code, fmt.Sprintf("No route %s %s.", r.Method, r.URL.Path))
	default:
		jsonapi.WriteError(w, code, http.StatusText(code)+".")
	}
}

// LimitBody reads at most the body limit of a request body up front: larger bodies get 413
// before any backend is called.
func (s *Relay) LimitBody(next http.Handler) http.Handler {
	limit := s.maxBody
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ContentLength > limit {
			jsonapi.WriteError(w, http.StatusRequestEntityTooLarge, s.tooLarge)
			return
		}
		if r.Body != nil && r.Body != http.NoBody {
			var body []byte
			var err error
			if n := r.ContentLength; n >= 0 {
				// The usual case: read exactly the announced length into one buffer.
				body = make([]byte, n)
				_, err = io.ReadFull(r.Body, body)
			} else {
				body, err = io.ReadAll(io.LimitReader(r.Body, limit+1))
			}
			if err != nil {
				jsonapi.WriteError(w, http.StatusBadRequest, jsonapi.ErrSendJSON)
				return
			}
			if int64(len(body)) > limit {
				jsonapi.WriteError(w, http.StatusRequestEntityTooLarge, s.tooLarge)
				return
			}
			r.Body = &bufferedBody{Reader: bytes.NewReader(body), b: body}
		}
		next.ServeHTTP(w, r)
	})
}

// bufferedBody is a request body LimitBody has read: the JSON decoder takes its bytes as they
// are instead of copying them again.
type bufferedBody struct {
	*bytes.Reader
	b []byte
}

func (*bufferedBody) Close() error { return nil }

// Take returns the unread bytes and marks them read.
func (b *bufferedBody) Take() []byte {
	rest := b.b[len(b.b)-b.Len():]
	_, _ = b.Seek(0, io.SeekEnd)
	return rest
}
