package service_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	lobbyv1 "github.com/vigil-dev/vigil/pkg/api/vigil/lobby/v1"
	"github.com/vigil-dev/vigil/pkg/clock/clocktest"
	"github.com/vigil-dev/vigil/pkg/redistest"
	"github.com/vigil-dev/vigil/pkg/server"
	"github.com/vigil-dev/vigil/services/lobby/service"
)

// replica starts another Lobby replica on prefix with clk, as start does.
func replica(t *testing.T, prefix string, clk *clocktest.Manual) lobbyv1.LobbyServiceClient {
	t.Helper()
	return serve(t, service.Options{
		Core:    server.Core{Prefix: prefix, Now: clk.Now},
		IdleTTL: time.Minute, PruneGrace: 30 * time.Second,
	})
}

// page asks for one page and fails the test on an error.
func page(t *testing.T, c lobbyv1.LobbyServiceClient, req *lobbyv1.ListRoomsRequest) *lobbyv1.ListRoomsResponse {
	t.Helper()
	res, err := c.ListRooms(context.Background(), req)
	if err != nil {
		t.Fatalf("ListRooms(%v) = %v", req, err)
	}
	return res
}

func TestPageSizeDefaultsTo50(t *testing.T) {
	t.Parallel()
	c, clk := start(t)
	for i := range 51 {
		create(t, c, fmt.Sprintf("Room %d", i))
		clk.Add(time.Millisecond)
	}
	first := page(t, c, &lobbyv1.ListRoomsRequest{})
	if len(first.GetRooms()) != 50 || first.GetNextPageToken() == "" {
		t.Fatalf("ListRooms() = %d rooms, next %q; want 50 and a next page", len(first.GetRooms()), first.GetNextPageToken())
	}
	last := page(t, c, &lobbyv1.ListRoomsRequest{PageToken: first.GetNextPageToken()})
	if got := roomCodes(last.GetRooms()); len(got) != 1 || got[0] == first.GetRooms()[49].GetCode() || last.GetNextPageToken() != "" {
		t.Fatalf("second page = %v, next %q; want the one oldest room and no next page", got, last.GetNextPageToken())
	}
	whole := page(t, c, &lobbyv1.ListRoomsRequest{PageSize: proto.Int32(200)})
	if len(whole.GetRooms()) != 51 || whole.GetNextPageToken() != "" {
		t.Fatalf("ListRooms(page_size 200) = %d rooms, next %q; want all 51, no next page", len(whole.GetRooms()), whole.GetNextPageToken())
	}
}

// TestPagingUnderChurn pages through the lobby 7 rooms at a time, on two replicas in turn,
// while rooms are touched (they move to the front), created, removed and change occupancy
// between pages. Every room that did not move is listed exactly once, and no room twice.
func TestPagingUnderChurn(t *testing.T) {
	t.Parallel()
	_, prefix := redistest.Client(t)
	clk := clocktest.New(time.UnixMilli(1_800_000_000_000))
	a, b := replica(t, prefix, clk), replica(t, prefix, clk)
	ctx := context.Background()
	var rooms []string
	for i := range 60 {
		rooms = append(rooms, create(t, a, fmt.Sprintf("Room %d", i)).GetCode())
		if i%3 == 0 { // some rooms share their last activity: the code breaks the tie
			clk.Add(time.Millisecond)
		}
	}
	moved := map[string]bool{}
	seen := map[string]int{}
	req := &lobbyv1.ListRoomsRequest{PageSize: proto.Int32(7)}
	for n := 0; ; n++ {
		c := a
		if n%2 == 1 {
			c = b
		}
		res := page(t, c, req)
		for _, r := range res.GetRooms() {
			seen[r.GetCode()]++
		}
		if res.GetNextPageToken() == "" {
			break
		}
		req.PageToken = res.GetNextPageToken()
		// Churn between pages: a touch moves a room up, a new room arrives at the front, a
		// removal and an occupancy change move nothing.
		clk.Add(time.Millisecond)
		touched := rooms[(n*13+5)%len(rooms)]
		if _, err := c.TouchRoom(ctx, &lobbyv1.TouchRoomRequest{Code: touched, At: clk.Now().UnixMilli()}); err != nil {
			t.Fatal(err)
		}
		moved[touched] = true
		moved[create(t, c, fmt.Sprintf("New %d", n)).GetCode()] = true
		gone := rooms[(n*17+11)%len(rooms)]
		if _, err := c.RemoveRoom(ctx, &lobbyv1.RemoveRoomRequest{Code: gone}); err != nil {
			t.Fatal(err)
		}
		moved[gone] = true
		counted := rooms[(n*7+3)%len(rooms)]
		if _, err := c.ApplyOccupancySnapshot(ctx, &lobbyv1.ApplyOccupancySnapshotRequest{Code: counted, Seq: int64(n + 1), Viewers: int32(n), Leaders: 1}); err != nil && status.Code(err) != codes.NotFound {
			t.Fatal(err)
		}
		if n > 100 {
			t.Fatal("paging did not end after 100 pages")
		}
	}
	for code, n := range seen {
		if n > 1 {
			t.Errorf("room %s listed %d times in one pass", code, n)
		}
	}
	for _, code := range rooms {
		if !moved[code] && seen[code] != 1 {
			t.Errorf("room %s did not change and was listed %d times, want once", code, seen[code])
		}
	}
}

func TestSearchAndJoinable(t *testing.T) {
	t.Parallel()
	c, clk := start(t)
	ctx := context.Background()
	names := []string{"Salsa Tuesday", "Tango", "Café crème", "Niño salsa", "SALSA late", "Bachata"}
	code := map[string]string{}
	for _, n := range names {
		code[n] = create(t, c, n).GetCode()
		clk.Add(time.Millisecond)
	}
	for _, n := range []string{"Salsa Tuesday", "Tango", "Café crème"} {
		if _, err := c.ApplyOccupancySnapshot(ctx, &lobbyv1.ApplyOccupancySnapshotRequest{Code: code[n], Seq: 1, Leaders: 1}); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		q        string
		joinable bool
		want     []string // most recently active first
	}{
		{"salsa", false, []string{"SALSA late", "Niño salsa", "Salsa Tuesday"}},
		{"salsa", true, []string{"Salsa Tuesday"}},
		{"", true, []string{"Café crème", "Tango", "Salsa Tuesday"}},
		{"cafe", false, []string{"Café crème"}},
		{"CRÈME", false, []string{"Café crème"}},
		{"nino", false, []string{"Niño salsa"}},
		{"niño", false, []string{"Niño salsa"}},
		{"tuesday salsa", false, []string{"Salsa Tuesday"}},
		{"waltz", false, nil},
	}
	for _, tc := range tests {
		var got []string
		req := &lobbyv1.ListRoomsRequest{Query: tc.q, Joinable: tc.joinable, PageSize: proto.Int32(1)}
		for {
			res := page(t, c, req)
			for _, r := range res.GetRooms() {
				got = append(got, r.GetName())
			}
			if res.GetNextPageToken() == "" {
				break
			}
			req.PageToken = res.GetNextPageToken()
		}
		if fmt.Sprint(got) != fmt.Sprint(tc.want) {
			t.Errorf("ListRooms(q=%q, joinable=%v) one per page = %q, want %q", tc.q, tc.joinable, got, tc.want)
		}
	}
}

func TestPageBadInputIsRefusedWithASentence(t *testing.T) {
	t.Parallel()
	c, clk := start(t)
	for i := range 3 {
		create(t, c, fmt.Sprintf("Salsa %d", i))
	}
	first := page(t, c, &lobbyv1.ListRoomsRequest{PageSize: proto.Int32(1), Query: "salsa"})
	tok := first.GetNextPageToken()
	tampered := []byte(tok)
	tampered[len(tampered)/2] ^= 1
	tests := []struct {
		name string
		req  *lobbyv1.ListRoomsRequest
		want string
	}{
		{"page size 0", &lobbyv1.ListRoomsRequest{PageSize: proto.Int32(0)}, "limit must be an integer from 1 through 200."},
		{"page size 201", &lobbyv1.ListRoomsRequest{PageSize: proto.Int32(201)}, "limit must be an integer from 1 through 200."},
		{"garbled token", &lobbyv1.ListRoomsRequest{PageToken: "not-a-token"}, "This pageToken is not one the lobby gave out (it was changed or cut short); list again without pageToken to start from the first page."},
		{"tampered token", &lobbyv1.ListRoomsRequest{PageToken: string(tampered), Query: "salsa"}, "This pageToken is not one the lobby gave out (it was changed or cut short); list again without pageToken to start from the first page."},
		{"another search", &lobbyv1.ListRoomsRequest{PageToken: tok, Query: "tango"}, "This pageToken belongs to another search: keep q and joinable the same while paging, or list again without pageToken."},
		{"control character", &lobbyv1.ListRoomsRequest{Query: "sal\tsa"}, "q must be at most 80 characters of text without control characters."},
	}
	for _, tc := range tests {
		_, err := c.ListRooms(context.Background(), tc.req)
		if st, _ := status.FromError(err); st.Code() != codes.InvalidArgument || st.Message() != tc.want {
			t.Errorf("ListRooms(%s) = %v, want InvalidArgument %q", tc.name, err, tc.want)
		}
	}
	// The same token is fine until its hour is up, then refused as expired.
	if res := page(t, c, &lobbyv1.ListRoomsRequest{PageSize: proto.Int32(1), Query: "salsa", PageToken: tok}); len(res.GetRooms()) != 1 {
		t.Fatalf("second page = %v, want one room", res.GetRooms())
	}
	clk.Add(time.Hour)
	_, err := c.ListRooms(context.Background(), &lobbyv1.ListRoomsRequest{PageSize: proto.Int32(1), Query: "salsa", PageToken: tok})
	if st, _ := status.FromError(err); st.Code() != codes.InvalidArgument || st.Message() != "This pageToken has expired (page tokens last 1 hour); list again without pageToken to start from the first page." {
		t.Fatalf("ListRooms(token an hour old) = %v, want InvalidArgument saying it expired", err)
	}
}

// A failover that lost the page tokens' key (a replica made it just before) leaves that
// replica signing with the lost key while a replica asking the new primary makes another. Each
// replica then honours the other's tokens: a token its key does not verify makes it read the
// store's key again, and it keeps that one.
func TestPageTokensSurviveALostPageKey(t *testing.T) {
	t.Parallel()
	rdb, prefix := redistest.Client(t)
	clk := clocktest.New(time.UnixMilli(1_800_000_000_000))
	a := replica(t, prefix, clk)
	var codes []string // most recently active first
	for i := range 3 {
		codes = append([]string{create(t, a, fmt.Sprintf("Room %d", i)).GetCode()}, codes...)
		clk.Add(time.Millisecond)
	}
	one := &lobbyv1.ListRoomsRequest{PageSize: proto.Int32(1)}
	page(t, a, one) // a made the key and keeps it
	if err := rdb.Del(context.Background(), prefix+":{lobby}:pagekey").Err(); err != nil {
		t.Fatal(err)
	}
	b := replica(t, prefix, clk) // makes another key on the "new primary"
	fromB := page(t, b, one)
	if fromB.GetNextPageToken() == "" {
		t.Fatal("b gave no next page token")
	}
	second := page(t, a, &lobbyv1.ListRoomsRequest{PageSize: proto.Int32(1), PageToken: fromB.GetNextPageToken()})
	if got := roomCodes(second.GetRooms()); !slices.Equal(got, codes[1:2]) {
		t.Fatalf("a's page after b's token = %v, want %v", got, codes[1:2])
	}
	third := page(t, b, &lobbyv1.ListRoomsRequest{PageSize: proto.Int32(1), PageToken: second.GetNextPageToken()})
	if got := roomCodes(third.GetRooms()); !slices.Equal(got, codes[2:]) || third.GetNextPageToken() != "" {
		t.Fatalf("b's page after a's token = %v, next %q; want %v and no next page", got, third.GetNextPageToken(), codes[2:])
	}
}
