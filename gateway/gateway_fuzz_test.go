package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"

	"github.com/vigil-dev/vigil/gateway/jsonapi"
	chatv1 "github.com/vigil-dev/vigil/pkg/api/vigil/chat/v1"
	lobbyv1 "github.com/vigil-dev/vigil/pkg/api/vigil/lobby/v1"
	locksv1 "github.com/vigil-dev/vigil/pkg/api/vigil/locks/v1"
	reservationsv1 "github.com/vigil-dev/vigil/pkg/api/vigil/reservations/v1"
	"github.com/vigil-dev/vigil/pkg/redistest"
	"github.com/vigil-dev/vigil/pkg/server/servertest"
	chatservice "github.com/vigil-dev/vigil/services/chat/service"
	lobbyservice "github.com/vigil-dev/vigil/services/lobby/service"
	locksservice "github.com/vigil-dev/vigil/services/locks/service"
	reservationservice "github.com/vigil-dev/vigil/services/reservations/service"
	roomservice "github.com/vigil-dev/vigil/services/room/service"
)

// Fuzz targets for the edge's handling of bad input. Run one with
//
//	go test ./gateway -run '^$' -fuzz '^FuzzDecodeRequest$' -fuzztime 30s
//
// Failing inputs land in testdata/fuzz/<target>/ and are replayed by every plain `go test`.

// fuzzMarshaler is the JSON dialect New builds for the domains' request bodies (the query
// parameters' sentences aside).
func fuzzMarshaler() *jsonapi.Dialect { return jsonapi.New(dialect) }

// fuzzMessages are the request bodies the REST routes decode.
var fuzzMessages = []func() proto.Message{
	func() proto.Message { return &reservationsv1.CreateReservationRequest{} },
	func() proto.Message { return &reservationsv1.ReplayAlarmRequest{} },
	func() proto.Message { return &reservationsv1.ConfirmReservationRequest{} },
	func() proto.Message { return &locksv1.AcquireRequest{} },
	func() proto.Message { return &locksv1.RenewRequest{} },
	func() proto.Message { return &chatv1.PostMessageRequest{} },
	func() proto.Message { return &lobbyv1.CreateRoomRequest{} },
}

// FuzzDecodeRequest: the gateway's JSON decoding never panics; it accepts a body or refuses it
// with a sentence; what it accepts renders back as JSON.
func FuzzDecodeRequest(f *testing.F) {
	for i, body := range []string{
		`{"ttlSeconds": 30}`, `{"ttlSeconds": "30"}`, `{"ttlSeconds": 3.5}`, `{"now": 1e3}`, `{}`, ``,
		`{"owner": "a", "ttlMs": 30000, "waitMs": 0}`, `{"owner": 5}`, `{"ttlMs": 99999999999999999999}`,
		`{"userId": "u", "username": "n", "body": "hi"}`, `[]`, `null`, `{"a":`,
		`{"name": "r", "video": {"title": "t", "durationMs": 1000}}`, `{"video": []}`, `{"video": {"durationMs": "x"}}`,
	} {
		f.Add(uint8(i), []byte(body))
	}
	m := fuzzMarshaler()
	f.Fuzz(func(t *testing.T, which uint8, data []byte) {
		msg := fuzzMessages[int(which)%len(fuzzMessages)]()
		err := m.Unmarshal(data, msg)
		if err != nil {
			if s := err.Error(); s == "" || !strings.HasSuffix(s, ".") || !utf8.ValidString(s) {
				t.Fatalf("decode(%q) refused with %q, want one sentence", data, s)
			}
			return
		}
		if _, err := m.Marshal(msg); err != nil {
			t.Fatalf("decode(%q) accepted %v, which does not render: %v", data, msg, err)
		}
		// The direct decoding reads what protojson reads.
		ref := fuzzMessages[int(which)%len(fuzzMessages)]()
		if len(bytes.TrimSpace(data)) > 0 {
			if err := (protojson.UnmarshalOptions{DiscardUnknown: true}).Unmarshal(data, ref); err != nil {
				t.Fatalf("decode(%q) accepted %v; protojson refuses it: %v", data, msg, err)
			}
		}
		if !proto.Equal(msg, ref) {
			t.Fatalf("decode(%q) = %v, protojson reads %v", data, msg, ref)
		}
	})
}

// fuzzStack is the whole gateway in front of real reservations, locks, chat, lobby and room
// services on one Redis.
func fuzzStack(tb testing.TB) http.Handler {
	tb.Helper()
	_, prefix := redistest.Client(tb)
	rurl := redistest.URL(tb)
	log := testLogger(nil)
	res := servertest.Start(tb, "reservations", servertest.Serve(reservationservice.New, reservationservice.Options{Core: testCore(rurl, prefix+"-r", log), Replay: true})).Addr
	locks := servertest.Start(tb, "locks", servertest.Serve(locksservice.New, locksservice.Options{Core: testCore(rurl, prefix+"-k", log)})).Addr
	chat := servertest.Start(tb, "chat", servertest.Serve(chatservice.New, chatservice.Options{Core: testCore(rurl, prefix+"-c", log)})).Addr
	lobby := servertest.Start(tb, "lobby", servertest.Serve(lobbyservice.New, lobbyservice.Options{Core: testCore(rurl, prefix+"-l", log)})).Addr
	room := servertest.Start(tb, "room", servertest.Serve(roomservice.New, roomservice.Options{Core: testCore(rurl, prefix+"-m", log), LobbyAddr: lobby, Shards: 2})).Addr
	g, err := New(context.Background(), Options{Backends: Backends{Reservations: res, Locks: locks, Chat: chat, Lobby: lobby, Room: room}, Logger: log})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(g.Close)
	return g.Handler()
}

var fuzzMethods = []string{"GET", "POST", "DELETE", "PUT", "PATCH", "HEAD", "OPTIONS"}

// edgeNumbers are the JSON numbers every numeric field of every route is sent: the safe-integer
// edges and just beyond, int64's and float64's limits, fractions, exponents and negatives.
var edgeNumbers = []string{
	"9007199254740991", "9007199254740992", "9007199254740993", "-9007199254740991", "-9007199254740992",
	"-9007199254740993", "1e17", "100000000000000000", "9223372036854775807", "9223372036854775808",
	"-9223372036854775809", "99999999999999999999", "1e400", "-1", "0", "1.5", "-0", "1e3", "1E3", "2e-3",
	"4294967296", "2147483648", "-2147483649",
}

// fuzzRequest is one seed of FuzzRoutes: a method (index into fuzzMethods), a path and a body.
type fuzzRequest struct {
	m          uint8
	path, body string
}

// validBodies are bodies every POST route accepts, which numericRequests then spoil one
// numeric field at a time.
var validBodies = map[string]map[string]any{
	"/reservations/{reservationId}":              {"ttlSeconds": 30},
	"/reservations/{reservationId}/replay-alarm": {"now": 1},
	"/locks/{resource}/acquire":                  {"owner": "o", "ttlMs": 1000, "waitMs": 0},
	"/locks/{resource}/renew":                    {"owner": "o", "ttlMs": 1000},
	"/chat/rooms/{room}/messages":                {"userId": "u", "body": "hi"},
	"/lobby/rooms":                               {"name": "r", "video": map[string]any{"title": "t", "durationMs": 1000}},
}

// numericRequests sends every edge number into every numeric field of every REST route: in the
// body of POST routes (nested fields too), in the query of GET routes. The request messages and
// their fields come from the routes' RPCs, so a new route or field is covered without a change
// here.
func numericRequests(tb testing.TB) []fuzzRequest {
	tb.Helper()
	var doc struct {
		Paths map[string]map[string]struct {
			OperationID string `json:"operationId"`
		} `json:"paths"`
	}
	if err := json.Unmarshal(openapiJSON, &doc); err != nil {
		tb.Fatal(err)
	}
	var out []fuzzRequest
	for path, ops := range doc.Paths {
		concrete := wildcard.ReplaceAllString(path, "num-test")
		for method, op := range ops {
			svc, rpc, _ := strings.Cut(op.OperationID, "_")
			md := requestMessage(tb, svc, rpc)
			for _, field := range numericFields(md, "") {
				for _, n := range edgeNumbers {
					switch strings.ToUpper(method) {
					case "GET", "DELETE":
						if strings.Contains(field, ".") {
							continue
						}
						m := uint8(slices.Index(fuzzMethods, strings.ToUpper(method)))
						out = append(out, fuzzRequest{m, concrete + "?" + field + "=" + url.QueryEscape(n), ""})
					case "POST":
						out = append(out, fuzzRequest{1, concrete, bodyWith(validBodies[path], field, n)})
					}
				}
			}
		}
	}
	slices.SortFunc(out, func(a, b fuzzRequest) int { return strings.Compare(a.path+a.body, b.path+b.body) })
	return out
}

// requestMessage finds the request message of rpc in the service whose OpenAPI tag is svc.
func requestMessage(tb testing.TB, svc, rpc string) protoreflect.MessageDescriptor {
	tb.Helper()
	var found protoreflect.MessageDescriptor
	protoregistry.GlobalFiles.RangeFiles(func(fd protoreflect.FileDescriptor) bool {
		for i := range fd.Services().Len() {
			s := fd.Services().Get(i)
			if string(s.Name()) == svc && strings.HasPrefix(string(s.FullName()), "vigil.") {
				if m := s.Methods().ByName(protoreflect.Name(rpc)); m != nil {
					found = m.Input()
					return false
				}
			}
		}
		return true
	})
	if found == nil {
		tb.Fatalf("no RPC %s.%s", svc, rpc)
	}
	return found
}

// numericFields are the JSON paths ("video.durationMs") of md's integer and float fields.
func numericFields(md protoreflect.MessageDescriptor, prefix string) []string {
	var out []string
	for i := range md.Fields().Len() {
		fd := md.Fields().Get(i)
		switch {
		case fd.Kind() == protoreflect.MessageKind && !fd.IsList() && !fd.IsMap():
			out = append(out, numericFields(fd.Message(), prefix+fd.JSONName()+".")...)
		case jsonapi.IntKind(fd.Kind()) || fd.Kind() == protoreflect.FloatKind || fd.Kind() == protoreflect.DoubleKind:
			out = append(out, prefix+fd.JSONName())
		}
	}
	return out
}

// bodyWith renders base with the field at path set to the raw JSON number n.
func bodyWith(base map[string]any, path, n string) string {
	var set func(obj map[string]any, path string) map[string]any
	set = func(obj map[string]any, path string) map[string]any {
		out := map[string]any{}
		for k, v := range obj {
			out[k] = v
		}
		head, rest, nested := strings.Cut(path, ".")
		if nested {
			inner, _ := out[head].(map[string]any)
			out[head] = set(inner, rest)
		} else {
			out[head] = json.RawMessage(n)
		}
		return out
	}
	b, _ := json.Marshal(set(base, path))
	if len(b) == 0 {
		// json.Marshal refuses a RawMessage that is not valid JSON (1e400 is): splice by hand.
		return fmt.Sprintf(`{%q: %s}`, path, n)
	}
	return string(b)
}

// TestRoutesRefuseUnsafeNumbers runs every numeric request through the whole stack: none is
// answered 5xx, and a number beyond the safe-integer range is always a 400 with a sentence.
func TestRoutesRefuseUnsafeNumbers(t *testing.T) {
	h := fuzzStack(t)
	reqs := numericRequests(t)
	if len(reqs) < 100 {
		t.Fatalf("only %d numeric requests; the route walk found too few fields", len(reqs))
	}
	unsafe := regexp.MustCompile(`(=|: )(9007199254740993|-9007199254740993|1e17|99999999999999999999)\b`)
	for _, r := range reqs {
		code, body := serveFuzz(h, r)
		if code >= 500 {
			t.Errorf("%s %s %s = %d %s, want a 4xx", fuzzMethods[r.m], r.path, r.body, code, body)
		}
		if unsafe.MatchString(r.path+r.body) && code != 400 {
			t.Errorf("%s %s %s = %d %s, want 400 (not a safe integer)", fuzzMethods[r.m], r.path, r.body, code, body)
		}
	}
}

// serveFuzz serves one request through h and returns its status and body.
func serveFuzz(h http.Handler, r fuzzRequest) (int, string) {
	u, err := url.Parse(r.path)
	if err != nil || u.Scheme != "" || u.Host != "" || !strings.HasPrefix(u.Path, "/") {
		return 0, "" // not a request line an HTTP server would hand the gateway
	}
	req := httptest.NewRequest(fuzzMethods[int(r.m)%len(fuzzMethods)], "/", strings.NewReader(r.body))
	req.URL = u
	req.RequestURI = u.RequestURI()
	if r.body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	b, _ := io.ReadAll(rec.Body)
	return rec.Code, string(b)
}

// FuzzRoutes sends arbitrary methods, paths, queries and bodies through the whole gateway to
// real reservations, locks, chat, lobby and room services: path validation and bad input answer
// 4xx, never 5xx, and nothing panics. Its seeds include every edge number in every numeric
// field of every route (numericRequests).
func FuzzRoutes(f *testing.F) {
	h := fuzzStack(f)
	for _, s := range []fuzzRequest{
		{1, "/reservations/abc", `{"ttlSeconds": 30}`},
		{1, "/reservations/ABC", `{"ttlSeconds": 30}`},
		{0, "/reservations/a%2Fb", ``},
		{1, "/reservations/abc/replay-alarm", `{"now": -1}`},
		{1, "/reservations/abc/confirm", `{}`},
		{0, "/reservations/" + strings.Repeat("a", 300), ``},
		{1, "/locks/orders%2F42/acquire", `{"owner": "o"}`},
		{0, "/locks/%2E%2E", ``},
		{1, "/chat/rooms/%7Bteam%7D/messages", `{"body": "x"}`},
		{1, "/lobby/rooms", `{"name": "r", "video": {"title": "t", "durationMs": 1000}}`},
		{1, "/lobby/rooms", `{"name": "", "video": {"durationMs": -1}}`},
		{0, "/lobby/rooms/zzzzzz", ``},
		{2, "/lobby/rooms/zzzzzz", ``},
		{0, "/rooms/abc/websocket?role=king", ``},
		{0, "/websocket?room=..", ``},
		{3, "/", ``},
		{0, "/admin/alarms", ``},
		{0, "/admin/reservations/alarms?next=9007199254740993", ``},
		{0, "/%zz", ``},
	} {
		f.Add(s.m, s.path, s.body)
	}
	for _, s := range numericRequests(f) {
		f.Add(s.m, s.path, s.body)
	}
	f.Fuzz(func(t *testing.T, m uint8, path, body string) {
		code, answer := serveFuzz(h, fuzzRequest{m, path, body})
		if code >= 500 {
			t.Fatalf("%s %q with body %q = %d %s, want a 4xx", fuzzMethods[int(m)%len(fuzzMethods)], path, body, code, answer)
		}
	})
}
