package gateway

import (
	"context"
	"net/http"
	"strconv"
	"sync"

	"github.com/grpc-ecosystem/grpc-gateway/v2/runtime"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/reflect/protoreflect"

	lobbyv1 "github.com/vigil-dev/vigil/pkg/api/vigil/lobby/v1"
)

// The lobby domain: POST /lobby/rooms, GET /lobby/rooms, GET /lobby/rooms/{code}. The lobby's
// other RPCs (occupancy deltas, snapshots, touches, token checks, removal) are for the Room
// service only and have no HTTP route. DELETE /lobby/rooms/{code} belongs to the room domain:
// the Room service checks the leader token, closes the sockets and removes the room from the
// Lobby (see gateway/room.go).
func lobbyDomain(addr string) domain {
	return domain{
		name: "lobby",
		addr: backendTarget(addr),
		rest: func(ctx context.Context, mux *runtime.ServeMux, conn *grpc.ClientConn) error {
			return lobbyv1.RegisterLobbyServiceHandler(ctx, mux, conn)
		},
		// GET /lobby/rooms is served directly (see serveRoomList); the grpc-gateway rule stays
		// for the OpenAPI document and is shadowed by this more specific route.
		own: func(g *Gateway, mux *router, conn *grpc.ClientConn) {
			mux.HandleFunc("GET /lobby/rooms", serveRoomList(g, lobbyv1.NewLobbyServiceClient(conn)))
		},
		created: map[string]int{
			"/vigil.lobby.v1.LobbyService/CreateRoom": http.StatusCreated,
		},
		fieldErrors: map[protoreflect.FullName]string{
			"vigil.lobby.v1.CreateRoomRequest.name":  "name must be 1 to 80 characters.",
			"vigil.lobby.v1.CreateRoomRequest.video": "Describe the video: {\"title\", \"durationMs\"}.",
			"vigil.lobby.v1.Video.title":             "video.title must be 1 to 200 characters.",
			"vigil.lobby.v1.Video.duration_ms":       "video.durationMs must be an integer from 1 through 86400000.",
		},
	}
}

// serveRoomList answers GET /lobby/rooms in place of the generic grpc-gateway route: the list
// is the lobby's hot, large answer (10,000 rooms are ~2 MiB of JSON), and the generic JSON
// dialect renders through protojson and a map round trip, about 30 times slower than writing
// the rooms directly. The JSON is the same: docs/API.md's room objects, numbers as numbers.
//
// The rendered list is kept with the lobby version it reflects; each request asks the Lobby
// whether that version is still current (known_version), so an unchanged lobby costs a tiny
// call and a copy. The version is also the ETag: a browser that polls with If-None-Match gets
// 304 while nothing changed.
func serveRoomList(g *Gateway, client lobbyv1.LobbyServiceClient) http.HandlerFunc {
	var mu sync.Mutex
	var cachedBody []byte
	var cachedVersion int64
	cached := false
	return func(w http.ResponseWriter, r *http.Request) {
		req := &lobbyv1.ListRoomsRequest{}
		// knownVersion is the route's documented query parameter; the cache below does its
		// work, but a bad value is still refused as on every route.
		if err := checkQuery(req, r.URL.Query()); err != nil {
			writeError(w, http.StatusBadRequest, err.Error())
			return
		}
		mu.Lock()
		if cached {
			v := cachedVersion
			req.KnownVersion = &v
		}
		body, version := cachedBody, cachedVersion
		mu.Unlock()
		res, err := client.ListRooms(r.Context(), req)
		if err != nil {
			g.writeRPCError(r.Context(), nil, nil, w, r, err)
			return
		}
		if !res.GetNotModified() {
			body, version = renderRoomList(res.GetRooms()), res.GetVersion()
			mu.Lock()
			if !cached || version >= cachedVersion {
				cachedBody, cachedVersion, cached = body, version, true
			}
			mu.Unlock()
		}
		etag := `"` + strconv.FormatInt(version, 10) + `"`
		w.Header().Set("ETag", etag)
		w.Header().Set("Cache-Control", "no-cache")
		if r.Header.Get("If-None-Match") == etag {
			w.WriteHeader(http.StatusNotModified)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(body)
	}
}

func renderRoomList(rooms []*lobbyv1.Room) []byte {
	b := make([]byte, 0, 64+len(rooms)*192)
	b = append(b, `{"rooms":[`...)
	for i, rm := range rooms {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendRoomJSON(b, rm)
	}
	return append(b, "]}\n"...)
}

// appendRoomJSON appends a lobby room as docs/API.md gives it.
func appendRoomJSON(b []byte, rm *lobbyv1.Room) []byte {
	b = append(b, `{"code":`...)
	b = appendJSONString(b, rm.GetCode())
	b = append(b, `,"name":`...)
	b = appendJSONString(b, rm.GetName())
	b = append(b, `,"video":{"title":`...)
	b = appendJSONString(b, rm.GetVideo().GetTitle())
	b = append(b, `,"durationMs":`...)
	b = strconv.AppendInt(b, rm.GetVideo().GetDurationMs(), 10)
	b = append(b, `},"viewers":`...)
	b = strconv.AppendInt(b, int64(rm.GetViewers()), 10)
	b = append(b, `,"leaderPresent":`...)
	b = strconv.AppendBool(b, rm.GetLeaderPresent())
	b = append(b, `,"lastActivity":`...)
	b = strconv.AppendInt(b, rm.GetLastActivity(), 10)
	b = append(b, `,"createdAt":`...)
	b = strconv.AppendInt(b, rm.GetCreatedAt(), 10)
	return append(b, '}')
}

// appendJSONString appends s as a JSON string. UTF-8 passes through; quotes, backslashes and
// control characters are escaped.
func appendJSONString(b []byte, s string) []byte {
	const hexDigits = "0123456789abcdef"
	b = append(b, '"')
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '"' || c == '\\':
			b = append(b, '\\', c)
		case c < 0x20:
			b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
		default:
			b = append(b, c)
		}
	}
	return append(b, '"')
}
