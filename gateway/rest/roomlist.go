package rest

import (
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"strconv"
	"sync"

	"google.golang.org/protobuf/proto"

	"github.com/vigil-dev/vigil/gateway/jsonapi"
	lobbyv1 "github.com/vigil-dev/vigil/pkg/api/vigil/lobby/v1"
)

// ServeRoomList answers GET /lobby/rooms?limit=N&pageToken=T&q=…&joinable=true in place of
// the generic grpc-gateway route: one page of the lobby, `{"rooms": [room, …],
// "nextPageToken": "…" | null}`, written directly (the generic dialect renders through
// protojson and a map round trip). The JSON is docs/API.md's room objects, numbers as numbers.
//
// Each page has its own ETag, a hash of its body: a client that asks again with If-None-Match
// gets 304 while that page is unchanged, whatever happened to rooms on other pages.
// Bad input (limit outside 1..200, a garbled, expired or foreign pageToken, joinable neither
// true nor false) is a 400 with the Lobby's sentence.
func (s *Relay) ServeRoomList(client lobbyv1.LobbyServiceClient) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		req := &lobbyv1.ListRoomsRequest{}
		// limit and knownVersion are checked by the dialect's integer rule, as on every route.
		if err := s.json.CheckQuery(req, q); err != nil {
			jsonapi.WriteError(w, http.StatusBadRequest, err.Error())
			return
		}
		if q.Has("limit") {
			n, err := strconv.ParseInt(q.Get("limit"), 10, 32)
			if err != nil {
				jsonapi.WriteError(w, http.StatusBadRequest, limitSentence)
				return
			}
			req.PageSize = proto.Int32(int32(n))
		}
		switch q.Get("joinable") {
		case "", "false":
		case "true":
			req.Joinable = true
		default:
			jsonapi.WriteError(w, http.StatusBadRequest, "joinable must be true or false.")
			return
		}
		req.PageToken, req.Query = q.Get("pageToken"), q.Get("q")
		res, err := client.ListRooms(r.Context(), req)
		if err != nil {
			s.WriteRPCError(w, r, err)
			return
		}
		buf := pageBuffers.Get().(*[]byte)
		defer pageBuffers.Put(buf)
		body, rooms := renderRoomPage((*buf)[:0], res.GetRooms(), res.GetNextPageToken())
		*buf = body
		// The ETag covers the rooms and whether a next page exists, not the token itself (its
		// expiry changes on every answer): a client that keeps a page keeps its token too,
		// and that token continues from the same room.
		etag := pageETag(body[:rooms], res.GetNextPageToken() != "")
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

// pageBuffers keeps the pages' JSON buffers: a page of 50 is about 10 KiB, written once and
// dropped, so under load each listing would otherwise grow a fresh one (the largest share of
// the gateway's allocations per page, and with it how often it collects garbage).
var pageBuffers = sync.Pool{New: func() any { b := make([]byte, 0, 16<<10); return &b }}

// pageETag is the ETag of a page whose rooms' JSON is rooms: a hash of it and of whether a next
// page exists.
func pageETag(rooms []byte, more bool) string {
	h := sha256.New()
	h.Write(rooms)
	if more {
		h.Write([]byte{1})
	} else {
		h.Write([]byte{0})
	}
	var sum [sha256.Size]byte
	return `"` + hex.EncodeToString(h.Sum(sum[:0])[:12]) + `"`
}

// limitSentence is the Lobby's own sentence for a page size out of range.
const limitSentence = "limit must be an integer from 1 through 200."

// renderRoomPage appends a page's JSON to b; body[:rooms] is its rooms, without the token.
func renderRoomPage(b []byte, rooms []*lobbyv1.Room, next string) (body []byte, roomsEnd int) {
	b = append(b, `{"rooms":[`...)
	for i, rm := range rooms {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendRoomJSON(b, rm)
	}
	b = append(b, ']')
	roomsEnd = len(b)
	b = append(b, `,"nextPageToken":`...)
	if next == "" {
		b = append(b, "null"...)
	} else {
		b = jsonapi.AppendString(b, next)
	}
	return append(b, "}\n"...), roomsEnd
}

// appendRoomJSON appends a lobby room as docs/API.md gives it.
func appendRoomJSON(b []byte, rm *lobbyv1.Room) []byte {
	b = append(b, `{"code":`...)
	b = jsonapi.AppendString(b, rm.GetCode())
	b = append(b, `,"name":`...)
	b = jsonapi.AppendString(b, rm.GetName())
	b = append(b, `,"video":{"title":`...)
	b = jsonapi.AppendString(b, rm.GetVideo().GetTitle())
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
