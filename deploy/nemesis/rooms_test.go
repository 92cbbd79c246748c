//go:build nemesis

package nemesis

import (
	"context"
	"fmt"
	"sync"
	"time"

	"google.golang.org/grpc"

	lobbyv1 "github.com/vigil-dev/vigil/pkg/api/vigil/lobby/v1"
	roomv1 "github.com/vigil-dev/vigil/pkg/api/vigil/room/v1"
)

// viewers is how many viewers a room workload keeps in its room.
const viewers = 12

// roomsWorkload keeps viewers in one room, each re-attaching its session (same session id) on
// whichever replica answers when its stream fails, as the gateway does for a socket; the check
// is the Lobby's viewer count after healing: exactly the viewers, none lost, none counted twice.
// Its time unavailable is the longest a viewer was without a working stream: from the fault's
// start to the re-attach of a viewer whose stream failed during the fault (its stream on a
// silent replica was dead from the start, though noticed later), or from any failure to the
// re-attach answering.
type roomsWorkload struct {
	name  string
	lobby lobbyv1.LobbyServiceClient
	code  string
	// churn is how many joiners come and go in the room beside the viewers, each joining
	// with a new session, taking the room's state and leaving at once: the store nemesis's
	// load, where the viewers' streams need no store and would measure nothing. Each
	// join is an operation (its availability the gap between them) and moves the Lobby's
	// count twice, which must end exact all the same.
	churn int

	mu       sync.Mutex
	attaches int
	detached time.Duration   // the longest a viewer was without an attached stream
	window   [2]time.Time    // the fault's start and end
	moved    time.Duration   // the longest from the fault's start to the re-attach of a viewer whose stream failed during it
	streams  context.Context // the viewers' streams live until check ends it
	close    context.CancelFunc
}

// run returns when ctx ends; the viewers stay (their streams open) until check has counted.
func (w *roomsWorkload) run(ctx context.Context, conn *grpc.ClientConn, avail *availability) {
	c := roomv1.NewRoomServiceClient(conn)
	w.streams, w.close = context.WithCancel(context.Background())
	cctx, cancel := context.WithTimeout(ctx, callTimeout)
	res, err := w.lobby.CreateRoom(cctx, &lobbyv1.CreateRoomRequest{Name: w.name, Video: &lobbyv1.Video{Title: "nemesis", DurationMs: 60_000}})
	cancel()
	if err != nil {
		return
	}
	w.code = res.GetCode()
	for i := range viewers {
		go func() {
			hello := &roomv1.Hello{Code: w.code, Role: roomv1.Role_ROLE_VIEWER, ClientId: fmt.Sprintf("v%d", i), SessionId: fmt.Sprintf("%s-v%d", w.name, i)}
			since := time.Now()
			for ctx.Err() == nil && w.streams.Err() == nil {
				w.attach(ctx, c, hello, avail, &since)
			}
		}()
	}
	for i := range w.churn {
		go func() {
			for n := 0; ctx.Err() == nil; n++ {
				hello := &roomv1.Hello{Code: w.code, Role: roomv1.Role_ROLE_VIEWER, ClientId: fmt.Sprintf("c%d", i), SessionId: fmt.Sprintf("%s-c%d-%d", w.name, i, n)}
				if w.visit(ctx, c, hello) {
					avail.ok()
				}
				pause(ctx, 100*time.Millisecond)
			}
		}()
	}
	<-ctx.Done()
}

// visit joins the room as a new session, takes its state and leaves (the stream's end closes
// the session); it says whether the join was answered.
func (w *roomsWorkload) visit(ctx context.Context, c roomv1.RoomServiceClient, hello *roomv1.Hello) bool {
	sctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	stream, err := c.Join(sctx)
	if err == nil {
		err = stream.Send(&roomv1.JoinRequest{Frame: &roomv1.JoinRequest_Hello{Hello: hello}})
	}
	if err == nil {
		_, err = stream.Recv()
	}
	if err != nil {
		return false
	}
	w.mu.Lock()
	w.attaches++
	w.mu.Unlock()
	return true
}

// attach opens (or re-attaches) the viewer's session and reads until the stream ends; the
// stream stays open past ctx (the viewers are still there when the count is checked).
// since is when the viewer last lost its stream.
func (w *roomsWorkload) attach(ctx context.Context, c roomv1.RoomServiceClient, hello *roomv1.Hello, avail *availability, since *time.Time) {
	sctx, cancel := context.WithCancel(w.streams)
	defer cancel()
	opened, ocancel := context.WithTimeout(sctx, callTimeout)
	defer ocancel()
	stream, err := c.Join(sctx)
	if err == nil {
		err = stream.Send(&roomv1.JoinRequest{Frame: &roomv1.JoinRequest_Hello{Hello: hello}})
	}
	if err != nil {
		pause(ctx, 100*time.Millisecond)
		return
	}
	// The first frame (the room's state) must come within callTimeout.
	go func() {
		<-opened.Done()
		if opened.Err() == context.DeadlineExceeded {
			cancel()
		}
	}()
	if _, err := stream.Recv(); err != nil {
		pause(ctx, 100*time.Millisecond)
		return
	}
	ocancel()
	avail.ok()
	w.mu.Lock()
	w.attaches++
	w.detached = max(w.detached, time.Since(*since))
	if from, to := w.window[0], w.window[1]; !from.IsZero() && !since.Before(from) && (to.IsZero() || since.Before(to)) {
		// Lost during the fault (a silent stream noticed by keepalive, say): unavailable
		// from the fault's start, not from the moment the failure was noticed.
		w.moved = max(w.moved, time.Since(from))
	}
	w.mu.Unlock()
	for {
		if _, err := stream.Recv(); err != nil {
			*since = time.Now()
			return
		}
	}
}

func pause(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}

// check waits for the Lobby's count of the room's viewers to read exactly viewers (a replica's
// stale sessions leave the count within their lease; a re-attached one is never counted
// twice), up to a bound, and reports the difference as lost or doubled.
func (w *roomsWorkload) check(ctx context.Context, _ *grpc.ClientConn) (outcome, error) {
	if w.close != nil {
		defer w.close()
	}
	w.mu.Lock()
	o := outcome{ops: w.attaches, unavailable: max(w.detached, w.moved)}
	w.mu.Unlock()
	if w.code == "" {
		return o, fmt.Errorf("the room was not created")
	}
	deadline := time.Now().Add(3*sessionLease + 30*time.Second)
	var count int32
	for {
		cctx, cancel := context.WithTimeout(ctx, callTimeout)
		res, err := w.lobby.GetRoom(cctx, &lobbyv1.GetRoomRequest{Code: w.code})
		cancel()
		if err == nil {
			count = res.GetRoom().GetViewers()
			if count == viewers {
				break
			}
		}
		if time.Now().After(deadline) {
			break
		}
		pause(ctx, 200*time.Millisecond)
	}
	o.lost = max(0, viewers-int(count))
	o.doubled = max(0, int(count)-viewers)
	return o, nil
}

// faulted marks the fault's start (and, at healed, its end).
func (w *roomsWorkload) faulted(at time.Time) { w.mu.Lock(); w.window[0] = at; w.mu.Unlock() }
func (w *roomsWorkload) healed(at time.Time)  { w.mu.Lock(); w.window[1] = at; w.mu.Unlock() }
