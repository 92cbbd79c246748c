package gateway

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"

	"github.com/vigil-dev/vigil/gateway/auth"
	"github.com/vigil-dev/vigil/gateway/jsonapi"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
)

// Every route the gateway serves is registered under its exact ServeMux pattern through a
// router, and needs the scope the route table gives that pattern (gateway/auth/scopes.go). A
// pattern without an entry cannot be registered (New fails), and a request whose pattern has no
// entry is refused: the gateway is closed by default.

// router registers routes on one ServeMux, each under a pattern of the route table and behind
// the guard that checks its scope, and remembers which it registered. It is the rest.Mux every
// part registers on.
type router struct {
	mux      *http.ServeMux
	guard    func(route string, h http.Handler) http.Handler
	patterns []string
	err      error
}

func newRouter(guard func(route string, h http.Handler) http.Handler) *router {
	return &router{mux: http.NewServeMux(), guard: guard}
}

// Handle registers h under pattern, which must have a scope in the route table.
func (rt *router) Handle(pattern string, h http.Handler) {
	if _, ok := auth.Scope(pattern); !ok {
		rt.err = errors.Join(rt.err, fmt.Errorf("route %q has no scope in the route table (gateway/auth/scopes.go)", pattern))
		return
	}
	if slices.Contains(rt.patterns, pattern) {
		rt.err = errors.Join(rt.err, fmt.Errorf("route %q is registered twice", pattern))
		return
	}
	rt.mux.Handle(pattern, rt.guard(pattern, h))
	rt.patterns = append(rt.patterns, pattern)
}

// HandleFunc registers h under pattern, which must have a scope in the route table.
func (rt *router) HandleFunc(pattern string, h func(http.ResponseWriter, *http.Request)) {
	rt.Handle(pattern, http.HandlerFunc(h))
}

// fail records an error of a part's registration; New reports it.
func (rt *router) fail(err error) { rt.err = errors.Join(rt.err, err) }

// registered reports whether pattern was registered.
func (rt *router) registered(pattern string) bool { return slices.Contains(rt.patterns, pattern) }

// route is the pattern a request matches, "" for none (a redirect to a cleaned path, which
// the ServeMux answers itself; the cleaned path is then routed and guarded like any other).
func (rt *router) route(r *http.Request) string {
	_, pattern := rt.mux.Handler(r)
	return pattern
}

// routeMethods are the methods the gateway's routes use, in the order an Allow header lists them.
var routeMethods = []string{http.MethodGet, http.MethodPost, http.MethodDelete}

// noRoute answers a request no route matched: 405 with Allow when the path is served for other
// methods, else 404.
func (rt *router) noRoute(w http.ResponseWriter, r *http.Request) {
	var allow []string
	for _, m := range routeMethods {
		probe := *r
		probe.Method = m
		if p := rt.route(&probe); p != "" && p != "/" {
			allow = append(allow, m)
		}
	}
	if len(allow) > 0 {
		w.Header().Set("Allow", strings.Join(allow, ", "))
		jsonapi.WriteError(w, http.StatusMethodNotAllowed, "Method not allowed.")
		return
	}
	jsonapi.WriteError(w, http.StatusNotFound, fmt.Sprintf("No route %s %s.", r.Method, r.URL.Path))
}

// domainServices names the gRPC service (the OpenAPI tag) whose HTTP rules each domain serves.
var domainServices = map[string]string{
	"reservations": "ReservationService",
	"locks":        "LockService",
	"chat":         "ChatService",
	"lobby":        "LobbyService",
	"room":         "RoomService",
}

// restRoutes are the REST patterns of openapi.json ("POST /locks/{resource}/acquire"), by the
// OpenAPI tag of their service. The OpenAPI document is generated from the same HTTP rules
// (proto/vigil/gateway.yaml) as the grpc-gateway handlers, so the two cannot differ.
var restRoutes = sync.OnceValue(func() map[string][]string {
	var doc struct {
		Paths map[string]map[string]struct {
			Tags []string `json:"tags"`
		} `json:"paths"`
	}
	if err := json.Unmarshal(openapiJSON, &doc); err != nil {
		panic("gateway: openapi/vigil.swagger.json: " + err.Error())
	}
	out := map[string][]string{}
	for path, ops := range doc.Paths {
		for method, op := range ops {
			for _, tag := range op.Tags {
				out[tag] = append(out[tag], strings.ToUpper(method)+" "+path)
			}
		}
	}
	for _, ps := range out {
		slices.Sort(ps)
	}
	return out
})

// restQueries are the request message types of the REST patterns that take query parameters
// (an "in": "query" parameter in openapi.json), which the runtime reads from the query: the
// gateway checks those before the runtime does (rest.Relay.CheckQuery).
var restQueries = sync.OnceValue(func() map[string]protoreflect.MessageType {
	var doc struct {
		Paths map[string]map[string]struct {
			OperationID string `json:"operationId"`
			Parameters  []struct {
				In string `json:"in"`
			} `json:"parameters"`
		} `json:"paths"`
	}
	if err := json.Unmarshal(openapiJSON, &doc); err != nil {
		panic("gateway: openapi/vigil.swagger.json: " + err.Error())
	}
	out := map[string]protoreflect.MessageType{}
	for path, ops := range doc.Paths {
		for method, op := range ops {
			if !slices.ContainsFunc(op.Parameters, func(p struct {
				In string `json:"in"`
			}) bool {
				return p.In == "query"
			}) {
				continue
			}
			svc, rpc, _ := strings.Cut(op.OperationID, "_")
			mt, ok := requestType(svc, rpc)
			if !ok {
				panic("gateway: openapi/vigil.swagger.json: no RPC " + op.OperationID)
			}
			out[strings.ToUpper(method)+" "+path] = mt
		}
	}
	return out
})

// requestType is the request message type of method rpc of the service named svc (its short
// name, the OpenAPI tag).
func requestType(svc, rpc string) (protoreflect.MessageType, bool) {
	var found protoreflect.MessageType
	protoregistry.GlobalFiles.RangeFiles(func(fd protoreflect.FileDescriptor) bool {
		sd := fd.Services().ByName(protoreflect.Name(svc))
		if sd == nil {
			return true
		}
		if md := sd.Methods().ByName(protoreflect.Name(rpc)); md != nil {
			if mt, err := protoregistry.GlobalTypes.FindMessageByName(md.Input().FullName()); err == nil {
				found = mt
				return false
			}
		}
		return true
	})
	return found, found != nil
}
