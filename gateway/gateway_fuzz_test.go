package gateway

import (
	"context"
	"io"
	"net"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	chatv1 "github.com/vigil-dev/vigil/pkg/api/vigil/chat/v1"
	lobbyv1 "github.com/vigil-dev/vigil/pkg/api/vigil/lobby/v1"
	locksv1 "github.com/vigil-dev/vigil/pkg/api/vigil/locks/v1"
	reservationsv1 "github.com/vigil-dev/vigil/pkg/api/vigil/reservations/v1"
	"github.com/vigil-dev/vigil/pkg/redistest"
	"github.com/vigil-dev/vigil/pkg/redisx"
	lobbyservice "github.com/vigil-dev/vigil/services/lobby/service"
	reservationservice "github.com/vigil-dev/vigil/services/reservations/service"
	roomservice "github.com/vigil-dev/vigil/services/room/service"
)

// Fuzz targets for the edge's handling of bad input. Run one with
//
//	go test ./gateway -run '^$' -fuzz '^FuzzDecodeRequest$' -fuzztime 30s
//
// Failing inputs land in testdata/fuzz/<target>/ and are replayed by every plain `go test`.

// fuzzMarshaler is the JSON dialect exactly as New builds it for every domain.
func fuzzMarshaler() *apiMarshaler {
	m := &apiMarshaler{allowEmpty: map[protoreflect.FullName]bool{}, fieldErrors: map[protoreflect.FullName]string{}}
	o := Options{Backends: Backends{Reservations: "x", Locks: "x", Chat: "x", Lobby: "x", Room: "x"}}
	for _, d := range o.domains() {
		for _, n := range d.allowEmpty {
			m.allowEmpty[n] = true
		}
		for n, msg := range d.fieldErrors {
			m.fieldErrors[n] = msg
		}
	}
	return m
}

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
	})
}

// FuzzRoomFrame: the practice-room frame parser turns any client frame into exactly one of a
// request or a refusal sentence, without panicking.
func FuzzRoomFrame(f *testing.F) {
	for _, s := range []string{
		`{"type":"sync","playing":true,"positionMs":1000}`, `{"type":"sync","playing":"yes"}`,
		`{"type":"formation","formation":{"a":[1,2]}}`, `{"type":"mark","positionMs":5,"label":"x"}`,
		`{"type":"reload","video":{"title":"t","durationMs":9}}`, `{"type":"reload","video":{"title":1}}`,
		`{"type":"mark","positionMs":1e3}`, `{"type":"nope"}`, `[]`, `{`, ``,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		req, refusal := decodeRoomFrame(data)
		if (req == nil) == (refusal == "") {
			t.Fatalf("decodeRoomFrame(%q) = %v, %q: want a request or a refusal, not both or neither", data, req, refusal)
		}
		if req != nil {
			if _, err := proto.Marshal(req); err != nil {
				t.Fatalf("decodeRoomFrame(%q) = %v, which does not marshal: %v", data, req, err)
			}
		}
	})
}

// startFuzzService runs a service for the whole fuzz run (testing.F has no *testing.T).
func startFuzzService(f *testing.F, name string, run func(ctx context.Context, ready func(net.Addr)) error) string {
	f.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	addrc := make(chan string, 1)
	done := make(chan error, 1)
	go func() { done <- run(ctx, func(a net.Addr) { addrc <- a.String() }) }()
	f.Cleanup(func() { cancel(); <-done })
	select {
	case a := <-addrc:
		return a
	case err := <-done:
		f.Fatalf("%s did not start: %v", name, err)
	case <-time.After(30 * time.Second):
		f.Fatalf("%s did not start within 30s", name)
	}
	return ""
}

var fuzzMethods = []string{"GET", "POST", "DELETE", "PUT", "PATCH", "HEAD", "OPTIONS"}

// FuzzRoutes sends arbitrary methods, paths, queries and bodies through the whole gateway to
// real reservations, lobby and room services: path validation and bad input answer 4xx,
// never 5xx, and nothing panics.
func FuzzRoutes(f *testing.F) {
	_, prefix := redistest.Client(f)
	rurl := redistest.URL(f)
	log := testLogger(nil)
	res := startFuzzService(f, "reservations", func(ctx context.Context, ready func(net.Addr)) error {
		svc, err := reservationservice.New(ctx, reservationservice.Options{Redis: redisx.Config{URL: rurl}, Prefix: prefix + "-r", Replay: true, Logger: log})
		if err != nil {
			return err
		}
		ready(svc.Addr())
		return svc.Serve(ctx)
	})
	lobby := startFuzzService(f, "lobby", func(ctx context.Context, ready func(net.Addr)) error {
		return lobbyservice.Run(ctx, lobbyservice.Options{Redis: redisx.Config{URL: rurl}, Prefix: prefix + "-l", Logger: log}, ready)
	})
	room := startFuzzService(f, "room", func(ctx context.Context, ready func(net.Addr)) error {
		return roomservice.Run(ctx, roomservice.Options{Redis: redisx.Config{URL: rurl}, Prefix: prefix + "-m", LobbyAddr: lobby, Shards: 2, Logger: log}, ready)
	})
	g, err := New(context.Background(), Options{Backends: Backends{Reservations: res, Lobby: lobby, Room: room}, Logger: log})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(g.Close)
	h := g.Handler()

	for _, s := range []struct {
		m          uint8
		path, body string
	}{
		{1, "/reservations/abc", `{"ttlSeconds": 30}`},
		{1, "/reservations/ABC", `{"ttlSeconds": 30}`},
		{0, "/reservations/a%2Fb", ``},
		{1, "/reservations/abc/replay-alarm", `{"now": -1}`},
		{1, "/reservations/abc/confirm", `{}`},
		{0, "/reservations/" + strings.Repeat("a", 300), ``},
		{1, "/lobby/rooms", `{"name": "r", "video": {"title": "t", "durationMs": 1000}}`},
		{1, "/lobby/rooms", `{"name": "", "video": {"durationMs": -1}}`},
		{0, "/lobby/rooms/zzzzzz", ``},
		{2, "/lobby/rooms/zzzzzz", ``},
		{0, "/rooms/abc/websocket?role=king", ``},
		{0, "/websocket?room=..", ``},
		{3, "/", ``},
		{0, "/admin/alarms", ``},
		{0, "/%zz", ``},
	} {
		f.Add(s.m, s.path, s.body)
	}
	f.Fuzz(func(t *testing.T, m uint8, path, body string) {
		u, err := url.Parse(path)
		if err != nil || u.Scheme != "" || u.Host != "" || !strings.HasPrefix(u.Path, "/") {
			return // not a request line an HTTP server would hand the gateway
		}
		req := httptest.NewRequest(fuzzMethods[int(m)%len(fuzzMethods)], "/", strings.NewReader(body))
		req.URL = u
		req.RequestURI = u.RequestURI()
		if body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code >= 500 {
			b, _ := io.ReadAll(rec.Body)
			t.Fatalf("%s %q with body %q = %d %s, want a 4xx", req.Method, path, body, rec.Code, b)
		}
	})
}
