package rest

import (
	"net/http"
	"strconv"
	"sync"

	"github.com/vigil-dev/vigil/gateway/jsonapi"
	lobbyv1 "github.com/vigil-dev/vigil/pkg/api/vigil/lobby/v1"
)

// ServeRoomList answers GET /lobby/rooms in place of the generic grpc-gateway route: the list
// is the lobby's hot, large answer (10,000 rooms are ~2 MiB of JSON), and the generic JSON
// dialect renders through protojson and a map round trip, about 30 times slower than writing
// the rooms directly. The JSON is the same: docs/API.md's room objects, numbers as numbers.
//
// The rendered list is kept with the lobby version it reflects; each request asks the Lobby
// whether that version is still current (known_version), so an unchanged lobby costs a tiny
// call and a copy. The version is also the ETag: a browser that polls with If-None-Match gets
// 304 while nothing changed.
func (s *Relay) ServeRoomList(client lobbyv1.LobbyServiceClient) http.HandlerFunc {
	var mu sync.Mutex
	var cachedBody []byte
	var cachedVersion int64
	cached := false
	return func(w http.ResponseWriter, r *http.Request) {
		req := &lobbyv1.ListRoomsRequest{}
		// knownVersion is the route's documented query parameter; the cache below does its
		// work, but a bad value is still refused as on every route.
		if err := s.json.CheckQuery(req, r.URL.Query()); err != nil {
			jsonapi.WriteError(w, http.StatusBadRequest, err.Error())
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
			s.WriteRPCError(w, r, err)
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
