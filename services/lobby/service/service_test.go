package service_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	lobbyv1 "github.com/vigil-dev/vigil/pkg/api/vigil/lobby/v1"
	"github.com/vigil-dev/vigil/pkg/clock/clocktest"
	"github.com/vigil-dev/vigil/pkg/prom/promtest"
	"github.com/vigil-dev/vigil/pkg/redistest"
	"github.com/vigil-dev/vigil/pkg/redisx"
	"github.com/vigil-dev/vigil/pkg/server"
	"github.com/vigil-dev/vigil/pkg/server/servertest"
	"github.com/vigil-dev/vigil/services/lobby/service"
)

func TestMain(m *testing.M) { redistest.Main(m) }

// start runs a lobby with a 1 min idle TTL and 30 s grace on a test clock.
func start(t *testing.T) (lobbyv1.LobbyServiceClient, *clocktest.Manual) {
	t.Helper()
	_, prefix := redistest.Client(t)
	clk := clocktest.New(time.UnixMilli(1_800_000_000_000))
	return replica(t, prefix, clk), clk
}

// serve runs a Lobby replica with o on the test's Redis until the test ends and returns a
// client of it.
func serve(t *testing.T, o service.Options) lobbyv1.LobbyServiceClient {
	t.Helper()
	o.Redis = redisx.Config{URL: redistest.URL(t)}
	return lobbyv1.NewLobbyServiceClient(servertest.Dial(t, servertest.StartService(t, "lobby", service.New, o).Addr))
}

// Every metric family the service documents (docs/OPERATIONS.md) is registered on the
// Registerer it is given, none on the process's default registry only.
func TestEveryMetricOnTheGivenRegisterer(t *testing.T) {
	t.Parallel()
	servertest.CheckRegisterer(t, func(ctx context.Context, core server.Core) (server.Service, error) {
		return service.New(ctx, service.Options{Core: core})
	}, slices.Concat(promtest.ServerFamilies, []string{"vigil_lobby_occupancy_updates_total"})...)
}

func create(t *testing.T, c lobbyv1.LobbyServiceClient, name string) *lobbyv1.CreateRoomResponse {
	t.Helper()
	res, err := c.CreateRoom(context.Background(), &lobbyv1.CreateRoomRequest{
		Name: name, Video: &lobbyv1.Video{Title: "Routine", DurationMs: 180_000},
	})
	if err != nil {
		t.Fatalf("CreateRoom(%q) = %v", name, err)
	}
	return res
}

func roomCodes(rooms []*lobbyv1.Room) []string {
	out := make([]string, len(rooms))
	for i, r := range rooms {
		out[i] = r.GetCode()
	}
	return out
}

func TestCreateListGetRemove(t *testing.T) {
	t.Parallel()
	c, clk := start(t)
	ctx := context.Background()
	a := create(t, c, "Salsa basics")
	if len(a.GetCode()) != 6 || len(a.GetLeaderToken()) < 32 {
		t.Fatalf("CreateRoom = code %q token %q, want a 6-character code and a long token", a.GetCode(), a.GetLeaderToken())
	}
	clk.Add(time.Second)
	b := create(t, c, "Hip hop")
	if a.GetCode() == b.GetCode() {
		t.Fatalf("two rooms got code %q", a.GetCode())
	}
	list, err := c.ListRooms(ctx, &lobbyv1.ListRoomsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if got := roomCodes(list.GetRooms()); len(got) != 2 || got[0] != b.GetCode() || got[1] != a.GetCode() {
		t.Fatalf("ListRooms = %v, want [%s %s] (most recent first)", got, b.GetCode(), a.GetCode())
	}
	// Touching a moves it to the front; an older touch never moves it back.
	clk.Add(time.Second)
	if _, err := c.TouchRoom(ctx, &lobbyv1.TouchRoomRequest{Code: a.GetCode(), At: clk.Now().UnixMilli()}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.TouchRoom(ctx, &lobbyv1.TouchRoomRequest{Code: a.GetCode(), At: 1}); err != nil {
		t.Fatal(err)
	}
	list, _ = c.ListRooms(ctx, &lobbyv1.ListRoomsRequest{})
	if got := roomCodes(list.GetRooms()); len(got) != 2 || got[0] != a.GetCode() {
		t.Fatalf("ListRooms after touch = %v, want %s first", got, a.GetCode())
	}
	g, err := c.GetRoom(ctx, &lobbyv1.GetRoomRequest{Code: a.GetCode()})
	if err != nil || g.GetRoom().GetName() != "Salsa basics" || g.GetRoom().GetLastActivity() != clk.Now().UnixMilli() {
		t.Fatalf("GetRoom = %v, %v", g, err)
	}
	v, err := c.VerifyLeaderToken(ctx, &lobbyv1.VerifyLeaderTokenRequest{Code: a.GetCode(), LeaderToken: a.GetLeaderToken()})
	if err != nil || !v.GetValid() {
		t.Fatalf("VerifyLeaderToken(right token) = %v, %v", v, err)
	}
	v, err = c.VerifyLeaderToken(ctx, &lobbyv1.VerifyLeaderTokenRequest{Code: a.GetCode(), LeaderToken: b.GetLeaderToken()})
	if err != nil || v.GetValid() {
		t.Fatalf("VerifyLeaderToken(other room's token) = %v, %v", v, err)
	}
	for i, want := range []bool{true, false} {
		r, err := c.RemoveRoom(ctx, &lobbyv1.RemoveRoomRequest{Code: a.GetCode()})
		if err != nil || r.GetRemoved() != want {
			t.Fatalf("RemoveRoom #%d = %v, %v; want removed=%v and no error", i+1, r, err, want)
		}
	}
	if _, err := c.GetRoom(ctx, &lobbyv1.GetRoomRequest{Code: a.GetCode()}); status.Code(err) != codes.NotFound {
		t.Fatalf("GetRoom(removed) = %v, want NotFound", err)
	}
}

func TestCreateRejectsBadInput(t *testing.T) {
	t.Parallel()
	c, _ := start(t)
	for _, req := range []*lobbyv1.CreateRoomRequest{
		{Name: "", Video: &lobbyv1.Video{Title: "x", DurationMs: 1}},
		{Name: "a\nb", Video: &lobbyv1.Video{Title: "x", DurationMs: 1}},
		{Name: "ok"},
		{Name: "ok", Video: &lobbyv1.Video{Title: "", DurationMs: 1}},
		{Name: "ok", Video: &lobbyv1.Video{Title: "x", DurationMs: 0}},
	} {
		if _, err := c.CreateRoom(context.Background(), req); status.Code(err) != codes.InvalidArgument {
			t.Errorf("CreateRoom(%v) = %v, want InvalidArgument", req, err)
		}
	}
}

func TestDeltaCompareAndSet(t *testing.T) {
	t.Parallel()
	c, _ := start(t)
	ctx := context.Background()
	code := create(t, c, "Deltas").GetCode()
	steps := []struct {
		seq      int64
		dv, dl   int32
		want     lobbyv1.DeltaOutcome
		viewers  int32
		leader   bool
		snapshot bool
	}{
		{seq: 1, dv: 1, want: lobbyv1.DeltaOutcome_DELTA_OUTCOME_APPLIED, viewers: 1},
		{seq: 1, dv: 1, want: lobbyv1.DeltaOutcome_DELTA_OUTCOME_STALE, viewers: 1},  // duplicate
		{seq: 3, dv: 1, want: lobbyv1.DeltaOutcome_DELTA_OUTCOME_RESYNC, viewers: 1}, // 2 lost
		{seq: 2, dl: 1, want: lobbyv1.DeltaOutcome_DELTA_OUTCOME_APPLIED, viewers: 1, leader: true},
		{seq: 3, dv: 1, want: lobbyv1.DeltaOutcome_DELTA_OUTCOME_APPLIED, viewers: 2, leader: true},
	}
	for _, s := range steps {
		res, err := c.ApplyOccupancyDelta(ctx, &lobbyv1.ApplyOccupancyDeltaRequest{Code: code, Seq: s.seq, ViewersDelta: s.dv, LeadersDelta: s.dl})
		if err != nil || res.GetOutcome() != s.want {
			t.Fatalf("ApplyOccupancyDelta(seq %d) = %v, %v; want %v", s.seq, res.GetOutcome(), err, s.want)
		}
		g, _ := c.GetRoom(ctx, &lobbyv1.GetRoomRequest{Code: code})
		if g.GetRoom().GetViewers() != s.viewers || g.GetRoom().GetLeaderPresent() != s.leader {
			t.Fatalf("after seq %d: viewers %d leader %v, want %d %v", s.seq, g.GetRoom().GetViewers(), g.GetRoom().GetLeaderPresent(), s.viewers, s.leader)
		}
	}
	// A snapshot at a newer seq wins; an older one is refused.
	snap, err := c.ApplyOccupancySnapshot(ctx, &lobbyv1.ApplyOccupancySnapshotRequest{Code: code, Seq: 7, Viewers: 5, Leaders: 0})
	if err != nil || !snap.GetApplied() {
		t.Fatalf("ApplyOccupancySnapshot(7) = %v, %v", snap, err)
	}
	snap, err = c.ApplyOccupancySnapshot(ctx, &lobbyv1.ApplyOccupancySnapshotRequest{Code: code, Seq: 6, Viewers: 1, Leaders: 1})
	if err != nil || snap.GetApplied() {
		t.Fatalf("ApplyOccupancySnapshot(6 after 7) = %v, %v; want not applied", snap, err)
	}
	res, _ := c.ApplyOccupancyDelta(ctx, &lobbyv1.ApplyOccupancyDeltaRequest{Code: code, Seq: 8, ViewersDelta: -1})
	g, _ := c.GetRoom(ctx, &lobbyv1.GetRoomRequest{Code: code})
	if res.GetOutcome() != lobbyv1.DeltaOutcome_DELTA_OUTCOME_APPLIED || g.GetRoom().GetViewers() != 4 || g.GetRoom().GetLeaderPresent() {
		t.Fatalf("delta 8 after snapshot 7: %v, room %v; want applied, 4 viewers, no leader", res.GetOutcome(), g.GetRoom())
	}
	if _, err := c.ApplyOccupancyDelta(ctx, &lobbyv1.ApplyOccupancyDeltaRequest{Code: "nosuch", Seq: 1}); status.Code(err) != codes.NotFound {
		t.Fatalf("ApplyOccupancyDelta(missing room) = %v, want NotFound", err)
	}
}

func TestListPrunesOnlyRoomsIdlePastTTLPlusGrace(t *testing.T) {
	t.Parallel()
	c, clk := start(t)
	ctx := context.Background()
	old := create(t, c, "Old").GetCode()
	clk.Add(50 * time.Second)
	fresh := create(t, c, "Fresh").GetCode()
	// 89 s after creating old: inside TTL (60 s) + grace (30 s), so it is still listed.
	clk.Add(39 * time.Second)
	list, _ := c.ListRooms(ctx, &lobbyv1.ListRoomsRequest{})
	if got := roomCodes(list.GetRooms()); len(got) != 2 {
		t.Fatalf("ListRooms at TTL+grace-1s = %v, want both rooms", got)
	}
	clk.Add(2 * time.Second)
	list, _ = c.ListRooms(ctx, &lobbyv1.ListRoomsRequest{})
	if got := roomCodes(list.GetRooms()); len(got) != 1 || got[0] != fresh {
		t.Fatalf("ListRooms past TTL+grace = %v, want only %s", got, fresh)
	}
	if _, err := c.GetRoom(ctx, &lobbyv1.GetRoomRequest{Code: old}); status.Code(err) != codes.NotFound {
		t.Fatalf("GetRoom(pruned) = %v, want NotFound", err)
	}
	// Pruned means gone: a late touch does not bring it back.
	if _, err := c.TouchRoom(ctx, &lobbyv1.TouchRoomRequest{Code: old, At: clk.Now().UnixMilli()}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.GetRoom(ctx, &lobbyv1.GetRoomRequest{Code: old}); status.Code(err) != codes.NotFound {
		t.Fatalf("GetRoom(pruned, touched) = %v, want NotFound", err)
	}
}

// TestListStaysCurrent checks the cached list against every kind of change.
func TestListStaysCurrent(t *testing.T) {
	t.Parallel()
	c, clk := start(t)
	ctx := context.Background()
	list := func() []*lobbyv1.Room {
		t.Helper()
		res, err := c.ListRooms(ctx, &lobbyv1.ListRoomsRequest{})
		if err != nil {
			t.Fatal(err)
		}
		return res.GetRooms()
	}
	a := create(t, c, "A").GetCode()
	clk.Add(time.Millisecond)
	b := create(t, c, "B").GetCode()
	if got := roomCodes(list()); len(got) != 2 || got[0] != b {
		t.Fatalf("list = %v, want [%s %s]", got, b, a)
	}
	if _, err := c.ApplyOccupancyDelta(ctx, &lobbyv1.ApplyOccupancyDeltaRequest{Code: a, Seq: 1, ViewersDelta: 2, LeadersDelta: 1}); err != nil {
		t.Fatal(err)
	}
	if rooms := list(); rooms[1].GetViewers() != 2 || !rooms[1].GetLeaderPresent() {
		t.Fatalf("list after a delta = %v, want a with 2 viewers and its leader", rooms)
	}
	clk.Add(time.Millisecond)
	if _, err := c.TouchRoom(ctx, &lobbyv1.TouchRoomRequest{Code: a, At: clk.Now().UnixMilli()}); err != nil {
		t.Fatal(err)
	}
	if got := roomCodes(list()); got[0] != a {
		t.Fatalf("list after touching %s = %v, want it first", a, got)
	}
	clk.Add(time.Millisecond)
	d := create(t, c, "D").GetCode()
	if _, err := c.RemoveRoom(ctx, &lobbyv1.RemoveRoomRequest{Code: b}); err != nil {
		t.Fatal(err)
	}
	if got := roomCodes(list()); len(got) != 2 || got[0] != d || got[1] != a {
		t.Fatalf("list after create and remove = %v, want [%s %s]", got, d, a)
	}
	if _, err := c.ApplyOccupancySnapshot(ctx, &lobbyv1.ApplyOccupancySnapshotRequest{Code: a, Seq: 5, Viewers: 7}); err != nil {
		t.Fatal(err)
	}
	if rooms := list(); rooms[1].GetViewers() != 7 || rooms[1].GetLeaderPresent() {
		t.Fatalf("list after a snapshot = %v, want a with 7 viewers and no leader", rooms)
	}
}

func TestListNotModified(t *testing.T) {
	t.Parallel()
	c, _ := start(t)
	ctx := context.Background()
	code := create(t, c, "A").GetCode()
	first, err := c.ListRooms(ctx, &lobbyv1.ListRoomsRequest{})
	if err != nil || len(first.GetRooms()) != 1 || first.GetNotModified() {
		t.Fatalf("ListRooms = %v, %v", first, err)
	}
	v := first.GetVersion()
	same, err := c.ListRooms(ctx, &lobbyv1.ListRoomsRequest{KnownVersion: &v})
	if err != nil || !same.GetNotModified() || len(same.GetRooms()) != 0 || same.GetVersion() != v {
		t.Fatalf("ListRooms(known_version %d) on an unchanged lobby = %v, %v; want not_modified", v, same, err)
	}
	if _, err := c.ApplyOccupancyDelta(ctx, &lobbyv1.ApplyOccupancyDeltaRequest{Code: code, Seq: 1, ViewersDelta: 1}); err != nil {
		t.Fatal(err)
	}
	changed, err := c.ListRooms(ctx, &lobbyv1.ListRoomsRequest{KnownVersion: &v})
	if err != nil || changed.GetNotModified() || changed.GetVersion() <= v || changed.GetRooms()[0].GetViewers() != 1 {
		t.Fatalf("ListRooms(known_version %d) after a change = %v, %v; want the new list", v, changed, err)
	}
}

// TestNumbersOutsideSafeIntegersAreRefused: every number of the Lobby's RPCs lies within
// ±(2^53-1) and its own range; anything else is INVALID_ARGUMENT with the field's sentence.
func TestNumbersOutsideSafeIntegersAreRefused(t *testing.T) {
	t.Parallel()
	c, _ := start(t)
	code := create(t, c, "Numbers").GetCode()
	const beyond = 1 << 53
	neg := int64(-1)
	tooNew := int64(beyond)
	ctx := context.Background()
	for _, tc := range []struct {
		what string
		call func() error
		want string
	}{
		{"delta seq 2^53", func() error {
			_, err := c.ApplyOccupancyDelta(ctx, &lobbyv1.ApplyOccupancyDeltaRequest{Code: code, Seq: beyond, ViewersDelta: 1})
			return err
		}, "seq must be an integer from 1 through 9007199254740991."},
		{"snapshot seq -1", func() error {
			_, err := c.ApplyOccupancySnapshot(ctx, &lobbyv1.ApplyOccupancySnapshotRequest{Code: code, Seq: -1})
			return err
		}, "seq must be an integer from 0 through 9007199254740991."},
		{"snapshot viewers -1", func() error {
			_, err := c.ApplyOccupancySnapshot(ctx, &lobbyv1.ApplyOccupancySnapshotRequest{Code: code, Seq: 1, Viewers: -1})
			return err
		}, "viewers must be an integer from 0 through 9007199254740991."},
		{"touch at 2^53", func() error {
			_, err := c.TouchRoom(ctx, &lobbyv1.TouchRoomRequest{Code: code, At: beyond})
			return err
		}, "at must be an integer from 1 through 9007199254740991."},
		{"list known version -1", func() error {
			_, err := c.ListRooms(ctx, &lobbyv1.ListRoomsRequest{KnownVersion: &neg})
			return err
		}, "knownVersion must be an integer from 0 through 9007199254740991."},
		{"list known version 2^53", func() error {
			_, err := c.ListRooms(ctx, &lobbyv1.ListRoomsRequest{KnownVersion: &tooNew})
			return err
		}, "knownVersion must be an integer from 0 through 9007199254740991."},
		{"video duration 2^53", func() error {
			_, err := c.CreateRoom(ctx, &lobbyv1.CreateRoomRequest{Name: "n", Video: &lobbyv1.Video{Title: "t", DurationMs: beyond}})
			return err
		}, "video.durationMs must be an integer from 1 through 86400000."},
	} {
		st := status.Convert(tc.call())
		if st.Code() != codes.InvalidArgument || st.Message() != tc.want {
			t.Errorf("%s = %v %q, want InvalidArgument %q", tc.what, st.Code(), st.Message(), tc.want)
		}
	}
}
