package service_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	adminv1 "github.com/vigil-dev/vigil/pkg/api/vigil/admin/v1"
	lobbyv1 "github.com/vigil-dev/vigil/pkg/api/vigil/lobby/v1"
	roomv1 "github.com/vigil-dev/vigil/pkg/api/vigil/room/v1"
	"github.com/vigil-dev/vigil/pkg/clock/clocktest"
	"github.com/vigil-dev/vigil/pkg/prom/promtest"
	"github.com/vigil-dev/vigil/pkg/redistest"
	"github.com/vigil-dev/vigil/pkg/redisx"
	"github.com/vigil-dev/vigil/pkg/server"
	"github.com/vigil-dev/vigil/pkg/server/servertest"
	"github.com/vigil-dev/vigil/pkg/wait"
	lobbyservice "github.com/vigil-dev/vigil/services/lobby/service"
	"github.com/vigil-dev/vigil/services/room/service"
)

func TestMain(m *testing.M) { redistest.Main(m) }

// faultyLobby forwards to the real Lobby and injects the faults a test turns on: failing
// removals, dropping a delta silently.
type faultyLobby struct {
	lobbyv1.UnimplementedLobbyServiceServer
	next lobbyv1.LobbyServiceClient

	failRemovals atomic.Int64 // fail this many RemoveRoom calls; -1 fails them all
	removeCalls  atomic.Int64
	dropDeltas   atomic.Int64 // answer APPLIED without forwarding to the next n deltas
	dropped      atomic.Int64
	snapshots    atomic.Int64

	mu      sync.Mutex
	changes []string // every delta and snapshot sent, as "delta <code> <viewers> <leaders>" or "snapshot <code> <viewers> <leaders>"
}

// sent lists the deltas and snapshots sent for code since the list was last cleared.
func (f *faultyLobby) sent(code string) []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for _, c := range f.changes {
		if strings.Fields(c)[1] == code {
			out = append(out, c)
		}
	}
	return out
}

func (f *faultyLobby) record(format string, args ...any) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.changes = append(f.changes, fmt.Sprintf(format, args...))
}

func (f *faultyLobby) CreateRoom(ctx context.Context, r *lobbyv1.CreateRoomRequest) (*lobbyv1.CreateRoomResponse, error) {
	return f.next.CreateRoom(ctx, r)
}
func (f *faultyLobby) ListRooms(ctx context.Context, r *lobbyv1.ListRoomsRequest) (*lobbyv1.ListRoomsResponse, error) {
	return f.next.ListRooms(ctx, r)
}
func (f *faultyLobby) GetRoom(ctx context.Context, r *lobbyv1.GetRoomRequest) (*lobbyv1.GetRoomResponse, error) {
	return f.next.GetRoom(ctx, r)
}
func (f *faultyLobby) RemoveRoom(ctx context.Context, r *lobbyv1.RemoveRoomRequest) (*lobbyv1.RemoveRoomResponse, error) {
	f.removeCalls.Add(1)
	if n := f.failRemovals.Load(); n != 0 {
		if n > 0 {
			f.failRemovals.Add(-1)
		}
		return nil, status.Error(codes.Unavailable, "removal failed on purpose")
	}
	return f.next.RemoveRoom(ctx, r)
}
func (f *faultyLobby) ApplyOccupancyDelta(ctx context.Context, r *lobbyv1.ApplyOccupancyDeltaRequest) (*lobbyv1.ApplyOccupancyDeltaResponse, error) {
	f.record("delta %s %+d %+d", r.GetCode(), r.GetViewersDelta(), r.GetLeadersDelta())
	for {
		n := f.dropDeltas.Load()
		if n <= 0 {
			break
		}
		if f.dropDeltas.CompareAndSwap(n, n-1) {
			f.dropped.Add(1)
			return &lobbyv1.ApplyOccupancyDeltaResponse{Outcome: lobbyv1.DeltaOutcome_DELTA_OUTCOME_APPLIED}, nil
		}
	}
	return f.next.ApplyOccupancyDelta(ctx, r)
}
func (f *faultyLobby) ApplyOccupancySnapshot(ctx context.Context, r *lobbyv1.ApplyOccupancySnapshotRequest) (*lobbyv1.ApplyOccupancySnapshotResponse, error) {
	f.snapshots.Add(1)
	f.record("snapshot %s %d %d", r.GetCode(), r.GetViewers(), r.GetLeaders())
	return f.next.ApplyOccupancySnapshot(ctx, r)
}
func (f *faultyLobby) TouchRoom(ctx context.Context, r *lobbyv1.TouchRoomRequest) (*lobbyv1.TouchRoomResponse, error) {
	return f.next.TouchRoom(ctx, r)
}
func (f *faultyLobby) VerifyLeaderToken(ctx context.Context, r *lobbyv1.VerifyLeaderTokenRequest) (*lobbyv1.VerifyLeaderTokenResponse, error) {
	return f.next.VerifyLeaderToken(ctx, r)
}

// env is a Lobby, a fault-injecting proxy in front of it, and one Room replica, all on one
// test's key prefix.
type env struct {
	t      *testing.T
	prefix string
	url    string
	lobby  lobbyv1.LobbyServiceClient // direct, for the test's own reads
	faults *faultyLobby
	proxy  string // the proxy's address: what Room replicas call
	room   roomv1.RoomServiceClient
	o      service.Options
	logs   *servertest.LogBuffer // every Room replica's log, at debug
	admin  adminv1.AlarmAdminServiceClient
	clk    *clocktest.Manual // nil unless settings.fakeClock
}

// alarmDue is when the room's alarm is due (ms), or 0 when it has none.
func (e *env) alarmDue(code string) int64 {
	e.t.Helper()
	res, err := e.admin.LookupObject(context.Background(), &adminv1.LookupObjectRequest{Id: code})
	if err != nil {
		e.t.Fatalf("LookupObject(%s): %v", code, err)
	}
	return res.GetAlarm().GetDueAt()
}

// logged returns the lines of logs logged at level (e.g. "ERROR").
func logged(logs *servertest.LogBuffer, level string) []string {
	var out []string
	for _, l := range logs.Lines() {
		var rec struct{ Level string }
		if json.Unmarshal([]byte(l), &rec) == nil && rec.Level == level {
			out = append(out, l)
		}
	}
	return out
}

// settings of an env; zero values take the defaults below.
type settings struct {
	idleTTL, grace, lease, retryBase time.Duration
	// fakeClock drives the Lobby and every Room replica with e.clk, which only moves when the
	// test advances it: expiry and retry timing then depend on no machine's speed.
	fakeClock bool
}

func newEnv(t *testing.T, s settings) *env {
	t.Helper()
	if s.idleTTL == 0 {
		s.idleTTL = time.Hour
	}
	if s.grace == 0 {
		s.grace = time.Minute
	}
	if s.lease == 0 {
		s.lease = 3 * time.Second
	}
	if s.retryBase == 0 {
		s.retryBase = 100 * time.Millisecond
	}
	e := &env{t: t, prefix: redistest.Prefix(t), url: redistest.URL(t)}
	var now func() time.Time
	if s.fakeClock {
		e.clk = clocktest.New(time.UnixMilli(1_900_000_000_000))
		now = e.clk.Now
	}
	_, prefix := redistest.Client(t) // deletes the prefix's keys at the end
	e.prefix = prefix
	lobby := servertest.StartService(t, "lobby", lobbyservice.New, lobbyservice.Options{
		Core:    server.Core{Redis: redisx.Config{URL: e.url}, Prefix: e.prefix + "-lobby", Logger: quiet(), Now: now},
		IdleTTL: s.idleTTL, PruneGrace: s.grace,
	})
	e.lobby = lobbyv1.NewLobbyServiceClient(servertest.Dial(t, lobby.Addr))
	e.faults = &faultyLobby{next: e.lobby}
	e.proxy = servertest.ServeGRPC(t, func(s *grpc.Server) { lobbyv1.RegisterLobbyServiceServer(s, e.faults) })
	e.logs = &servertest.LogBuffer{}
	e.o = service.Options{
		Core:   server.Core{Redis: redisx.Config{URL: e.url}, Prefix: e.prefix + "-room", Now: now, Logger: slog.New(slog.NewJSONHandler(e.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))},
		Shards: 4, LobbyAddr: e.proxy,
		IdleTTL: s.idleTTL, SessionLease: s.lease, AlarmRetryBase: s.retryBase, AlarmMaxRetries: 20,
		AlarmLease: 2 * time.Second,
	}
	conn := servertest.Dial(t, e.startRoom())
	e.room = roomv1.NewRoomServiceClient(conn)
	e.admin = adminv1.NewAlarmAdminServiceClient(conn)
	return e
}

// startRoom starts one more Room replica and returns its address.
func (e *env) startRoom() string { return e.serveRoom().Addr }

// serveRoom starts one more Room replica, served until the test ends or stops it.
func (e *env) serveRoom() *servertest.Running {
	e.t.Helper()
	return servertest.StartService(e.t, "room", service.New, e.o)
}

// replica is a Room replica the test stops itself.
type replica struct {
	addr   string
	client roomv1.RoomServiceClient
	stop   func() // a graceful stop (the drain), returning once it is done
}

// startReplica starts a Room replica on the env's Redis and Lobby that the test can stop.
func (e *env) startReplica() *replica {
	e.t.Helper()
	s := e.serveRoom()
	return &replica{addr: s.Addr, client: roomv1.NewRoomServiceClient(servertest.Dial(e.t, s.Addr)), stop: func() { s.Drain(e.t) }}
}

func quiet() *slog.Logger { return slog.New(slog.NewJSONHandler(io.Discard, nil)) }

// Every metric family the service documents (docs/OPERATIONS.md) is registered on the
// Registerer it is given, none on the process's default registry only.
func TestEveryMetricOnTheGivenRegisterer(t *testing.T) {
	t.Parallel()
	servertest.CheckRegisterer(t, func(ctx context.Context, core server.Core) (server.Service, error) {
		return service.New(ctx, service.Options{Core: core, LobbyAddr: "127.0.0.1:1"})
	}, slices.Concat(promtest.ServerFamilies, promtest.AlarmFamilies)...)
}

// leaderAndTwoViewers creates a room and joins its leader ("lead") and two viewers ("v1",
// "v2") on e's first replica.
func (e *env) leaderAndTwoViewers() (code string, l, v1, v2 *member) {
	e.t.Helper()
	code, token := e.createRoom()
	l = join(e.t, e.room, code, leader, "lead", token)
	v1 = join(e.t, e.room, code, viewer, "v1", "")
	v2 = join(e.t, e.room, code, viewer, "v2", "")
	return code, l, v1, v2
}

// createRoom opens a room in the Lobby and returns its code and leader token.
func (e *env) createRoom() (string, string) {
	e.t.Helper()
	res, err := e.lobby.CreateRoom(context.Background(), &lobbyv1.CreateRoomRequest{
		Name: "Practice", Video: &lobbyv1.Video{Title: "Routine", DurationMs: 200_000},
	})
	if err != nil {
		e.t.Fatalf("CreateRoom: %v", err)
	}
	return res.GetCode(), res.GetLeaderToken()
}

// lobbyRoom reads the room from the Lobby; nil when it is not there.
func (e *env) lobbyRoom(code string) *lobbyv1.Room {
	e.t.Helper()
	res, err := e.lobby.GetRoom(context.Background(), &lobbyv1.GetRoomRequest{Code: code})
	if status.Code(err) == codes.NotFound {
		return nil
	}
	if err != nil {
		e.t.Fatalf("GetRoom(%s): %v", code, err)
	}
	return res.GetRoom()
}

// listed reports whether the Lobby lists the room.
func (e *env) listed(code string) bool {
	e.t.Helper()
	res, err := e.lobby.ListRooms(context.Background(), &lobbyv1.ListRoomsRequest{})
	if err != nil {
		e.t.Fatalf("ListRooms: %v", err)
	}
	for _, r := range res.GetRooms() {
		if r.GetCode() == code {
			return true
		}
	}
	return false
}

// member is one open Join stream with its frames collected in the background.
type member struct {
	stream roomv1.RoomService_JoinClient
	cancel context.CancelFunc
	state  *roomv1.State

	streamEnd // mu also guards frames
	frames    []*roomv1.JoinResponse
	wake      chan struct{}
}

// streamEnd is how a test's stream (a Join or an Attach) ended, set by its reader goroutine:
// err is nil while it is open, io.EOF after an Ended frame.
type streamEnd struct {
	t   *testing.T
	mu  sync.Mutex
	err error
}

// streamErr waits for the stream to end and returns how it ended.
func (e *streamEnd) streamErr() error {
	e.t.Helper()
	var err error
	wait.Until(e.t, "the stream ends", func() bool {
		e.mu.Lock()
		defer e.mu.Unlock()
		err = e.err
		return err != nil
	})
	return err
}

// join opens a session on client c; it fails the test unless the state arrives.
func join(t *testing.T, c roomv1.RoomServiceClient, code string, role roomv1.Role, clientID, token string) *member {
	t.Helper()
	m, err := tryJoin(t, c, code, role, clientID, token)
	if err != nil {
		t.Fatalf("join %s as %v/%s: %v", code, role, clientID, err)
	}
	return m
}

// tryJoin opens a session and returns the error that refused it, if any.
func tryJoin(t *testing.T, c roomv1.RoomServiceClient, code string, role roomv1.Role, clientID, token string) (*member, error) {
	t.Helper()
	return tryHello(t, c, &roomv1.Hello{Code: code, Role: role, ClientId: clientID, LeaderToken: token})
}

// tryHello opens (or re-attaches) a session with hello.
func tryHello(t *testing.T, c roomv1.RoomServiceClient, hello *roomv1.Hello) (*member, error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	stream, err := c.Join(ctx)
	if err != nil {
		cancel()
		return nil, err
	}
	if err := stream.Send(&roomv1.JoinRequest{Frame: &roomv1.JoinRequest_Hello{Hello: hello}}); err != nil {
		cancel()
		return nil, err
	}
	first, err := stream.Recv()
	if err != nil {
		cancel()
		return nil, err
	}
	m := &member{streamEnd: streamEnd{t: t}, stream: stream, cancel: cancel, state: first.GetState(), wake: make(chan struct{}, 1)}
	if m.state == nil {
		cancel()
		t.Fatalf("first frame = %v, want state", first)
	}
	go m.read()
	t.Cleanup(cancel)
	return m, nil
}

func (m *member) read() {
	for {
		f, err := m.stream.Recv()
		m.mu.Lock()
		if err != nil {
			m.err = err
		} else {
			m.frames = append(m.frames, f)
		}
		m.mu.Unlock()
		select {
		case m.wake <- struct{}{}:
		default:
		}
		if err != nil {
			return
		}
	}
}

// leave closes the member's stream from the client side.
func (m *member) leave() { m.cancel() }

func (m *member) send(req *roomv1.JoinRequest) {
	m.t.Helper()
	if err := m.stream.Send(req); err != nil {
		m.t.Fatalf("send %v: %v", req, err)
	}
}

// await waits for a frame that matches (failing the test after wait.Deadline); it returns the
// first such frame.
func (m *member) await(what string, match func(*roomv1.JoinResponse) bool) *roomv1.JoinResponse {
	m.t.Helper()
	deadline := time.After(wait.Deadline)
	for {
		m.mu.Lock()
		for _, f := range m.frames {
			if match(f) {
				m.mu.Unlock()
				return f
			}
		}
		err := m.err
		m.mu.Unlock()
		if err != nil {
			m.t.Fatalf("stream ended (%v) before %s", err, what)
		}
		select {
		case <-m.wake:
		case <-deadline:
			m.t.Fatalf("no %s within %v", what, wait.Deadline)
		}
	}
}

// ended waits for the stream to end (failing the test after wait.Deadline) and returns the
// Ended frame's reason.
func (m *member) ended() string {
	m.t.Helper()
	deadline := time.After(wait.Deadline)
	for {
		m.mu.Lock()
		err := m.err
		var reason string
		for _, f := range m.frames {
			if e := f.GetEnded(); e != nil {
				reason = e.GetReason()
			}
		}
		m.mu.Unlock()
		if err != nil {
			if err != io.EOF {
				m.t.Fatalf("stream ended with %v, want a clean end", err)
			}
			return reason
		}
		select {
		case <-m.wake:
		case <-deadline:
			m.t.Fatalf("stream still open after %v", wait.Deadline)
		}
	}
}

func syncFrame(playing bool, pos int64) *roomv1.JoinRequest {
	return &roomv1.JoinRequest{Frame: &roomv1.JoinRequest_Sync{Sync: &roomv1.Sync{Playing: playing, PositionMs: pos}}}
}

func viewers(e *env, code string, n int32, leader bool) func() bool {
	return func() bool {
		r := e.lobbyRoom(code)
		return r != nil && r.GetViewers() == n && r.GetLeaderPresent() == leader
	}
}
