package rest

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/vigil-dev/vigil/gateway/backend"
	"github.com/vigil-dev/vigil/gateway/jsonapi"
)

// The busiest REST routes (creating, confirming and releasing a hold; taking, giving back and
// renewing a lock) skip the grpc-gateway runtime. Through it a request is routed twice (the
// ServeMux, then the runtime's own mux), its context is annotated with metadata no service
// reads, and the answer passes through the runtime's forwarding hooks. A unary route
// (HandleUnary) is the same HTTP rule answered straight from the ServeMux's match: body decoded
// by the gateway's JSON dialect, path bound from the pattern, one gRPC call, the answer
// marshalled once. What it writes is what the runtime writes for the same rule, status, headers
// and body alike (TestUnaryRoutesMatchTheRuntime drives both with the same requests); every
// other route stays on the runtime.

// HandleUnary registers pattern, an HTTP rule whose body is the whole request message
// ("body: *"), as a unary route: call is the gRPC method (returning the rule's response_body),
// success the status of a successful answer. Each {wildcard} of pattern sets the request field
// of that JSON name, after the body, so the path wins as it does in the runtime.
func HandleUnary[R any, Req interface {
	*R
	proto.Message
}](s *Relay, mux Mux, pattern string, success int, call func(context.Context, Req) (proto.Message, error)) error {
	md := Req(new(R)).ProtoReflect().Descriptor()
	type param struct {
		wildcard string
		field    protoreflect.FieldDescriptor
	}
	var params []param
	for _, seg := range strings.Split(pattern, "/") {
		if name, ok := strings.CutPrefix(seg, "{"); ok {
			name = strings.TrimSuffix(name, "}")
			fd := md.Fields().ByJSONName(name)
			if fd == nil || fd.Kind() != protoreflect.StringKind {
				return fmt.Errorf("route %q: %s has no string field %q", pattern, md.FullName(), name)
			}
			params = append(params, param{name, fd})
		}
	}
	mux.Handle(pattern, s.LimitBody(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		req := Req(new(R))
		if err := s.json.Decode(requestBody(r), req); err != nil {
			s.WriteRPCError(w, r, status.Error(codes.InvalidArgument, err.Error()))
			return
		}
		m := req.ProtoReflect()
		for _, p := range params {
			m.Set(p.field, protoreflect.ValueOfString(r.PathValue(p.wildcard)))
		}
		// A deadline on every call, relayed over a lock session or not: a lock acquire may wait
		// its waitMs first.
		timeout := backend.CallTimeout
		if wm, ok := any(req).(interface{ GetWaitMs() int64 }); ok {
			timeout += time.Duration(max(0, wm.GetWaitMs())) * time.Millisecond // the service refuses < 0
		}
		ctx, cancel := context.WithTimeout(r.Context(), timeout)
		defer cancel()
		res, err := call(ctx, req)
		if err != nil {
			s.WriteRPCError(w, r, err)
			return
		}
		out, err := jsonapi.Marshal(res)
		if err != nil {
			s.WriteRPCError(w, r, status.Error(codes.Internal, err.Error()))
			return
		}
		h := w.Header()
		h.Set("Content-Type", "application/json")
		h.Set("Content-Length", strconv.Itoa(len(out)))
		w.WriteHeader(success)
		_, _ = w.Write(out)
	})))
	return nil
}

// requestBody is the body LimitBody read; nil when there is none.
func requestBody(r *http.Request) []byte {
	switch b := r.Body.(type) {
	case *bufferedBody:
		return b.Take()
	case nil:
		return nil
	default:
		if b == http.NoBody {
			return nil
		}
		data, _ := io.ReadAll(b)
		return data
	}
}
