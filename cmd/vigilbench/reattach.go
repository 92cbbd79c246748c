package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/coder/websocket"
	"golang.org/x/sync/errgroup"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	lobbyv1 "github.com/vigil-dev/vigil/pkg/api/vigil/lobby/v1"
	"github.com/vigil-dev/vigil/pkg/grpcdial"
)

// A Room replica restarted under a gateway holding many practice rooms: every room's Attach
// stream breaks at once, and the rooms' back-off decides when (and how bunched) they come back.
// The Lobby, the one Room replica and the gateway run as processes of their own (built from
// their cmd packages); one viewer socket per room; the Room replica is SIGKILLed and started
// again on its address. A room is attached again when its socket receives the fresh "state"
// frame the gateway forwards from the new stream. Measured per restart: how long the replica
// took to listen again, the re-attach burst's spread (first to last room, and the 1st to the
// 99th percentile), the time from the replica listening until each room is attached (p50, p99,
// max), and the Room process's CPU over its busiest 100 ms. -before names another checkout
// (a worktree of an earlier commit) whose gateway takes the same rooms and restarts first.

type reattachBench struct {
	rooms, restarts int
	settle, down    time.Duration
	before          string
}

func benchReattach(ctx context.Context, h *Harness, fs *flag.FlagSet, args []string) error {
	var o reattachBench
	fs.IntVar(&o.rooms, "rooms", 1000, "practice rooms on the gateway, one viewer socket each")
	fs.IntVar(&o.restarts, "restarts", 3, "restarts of the Room replica per gateway")
	fs.DurationVar(&o.settle, "settle", 3*time.Second, "quiet time before each restart")
	fs.DurationVar(&o.down, "down", 0, "how long the Room replica stays down between the kill and its start (a container's restart takes seconds)")
	fs.StringVar(&o.before, "before", "", "another Vigil checkout (git worktree add /tmp/before <commit>) whose gateway is measured first, on the same rooms")
	if err := parseBenchFlags(fs, args); err != nil {
		return err
	}
	if o.rooms < 1 || o.restarts < 1 {
		return fmt.Errorf("%w: -rooms and -restarts must be 1 or more", errUsage)
	}
	rep := h.Report
	rep.Settings["rooms"] = o.rooms
	rep.Settings["restarts"] = o.restarts
	rep.Settings["down"] = o.down.String()
	rb, err := h.Redis(ctx)
	if err != nil {
		return err
	}
	bins, cleanup, err := buildCommands(ctx, "services/lobby/cmd/lobby", "services/room/cmd/room", "gateway/cmd/gateway")
	if err != nil {
		return err
	}
	h.stack.onStop(cleanup)
	type variant struct{ name, bin string }
	variants := []variant{{"this checkout", bins[2]}}
	if o.before != "" {
		b, cleanupBefore, err := buildCommandsAt(ctx, o.before, "gateway/cmd/gateway")
		if err != nil {
			return err
		}
		h.stack.onStop(cleanupBefore)
		variants = append([]variant{{"before (" + o.before + ")", b[0]}}, variants...)
		rep.Settings["before"] = o.before
	}
	var addrs [2]string
	for i := range addrs {
		if addrs[i], err = freeAddr(); err != nil {
			return err
		}
	}
	lobbyAddr, roomAddr := addrs[0], addrs[1]
	common := []string{"-redis-url", rb.url, "-prefix", h.Prefix, "-metrics-addr", "", "-log-format", "text", "-log-level", "warn"}
	if err := h.Process(ctx, "lobby", bins[0], lobbyAddr, append([]string{"-grpc-addr", lobbyAddr}, common...)...); err != nil {
		return err
	}
	room := &child{name: "room", bin: bins[1], addr: roomAddr, args: append([]string{"-grpc-addr", roomAddr, "-lobby-addr", lobbyAddr}, common...)}
	if err := room.start(ctx); err != nil {
		return err
	}
	h.stack.onStop(func() { room.stop(os.Interrupt) })

	conn, err := grpcdial.New(lobbyAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	h.stack.onStop(func() { _ = conn.Close() })
	benchStage("creating %d rooms", o.rooms)
	codes, err := createRooms(ctx, lobbyv1.NewLobbyServiceClient(conn), o.rooms)
	if err != nil {
		return err
	}

	t := rep.table("reattach", fmt.Sprintf("%d rooms on one gateway, the Room replica SIGKILLed and started again", o.rooms),
		benchColumn{"restart", "ms"}, benchColumn{"attached", "rooms"}, benchColumn{"spread", "ms"}, benchColumn{"p1-p99", "ms"},
		benchColumn{"p50", "ms"}, benchColumn{"p99", "ms"}, benchColumn{"max", "ms"}, benchColumn{"Room CPU peak", "cores"}, benchColumn{"load", "1m"})
	for _, v := range variants {
		gwAddr, err1 := freeAddr()
		metrics, err2 := freeAddr()
		if err1 != nil || err2 != nil {
			return fmt.Errorf("free ports: %v %v", err1, err2)
		}
		gw := &child{name: "gateway", bin: v.bin, addr: gwAddr, args: []string{"-addr", gwAddr, "-metrics-addr", metrics,
			"-lobby-addr", lobbyAddr, "-room-addr", roomAddr, "-rate-limit", "-1", "-log-format", "text", "-log-level", "warn"}}
		if err := gw.start(ctx); err != nil {
			return err
		}
		err := func() error {
			defer gw.stop(os.Interrupt)
			if err := waitHTTP(ctx, benchHTTPClient(), "http://"+gwAddr+"/healthz"); err != nil {
				return err
			}
			benchStage("%s: opening %d viewer sockets", v.name, len(codes))
			socks, err := openViewers(ctx, "ws://"+gwAddr, codes)
			defer func() {
				for _, s := range socks {
					_ = s.c.CloseNow()
				}
			}()
			if err != nil {
				return err
			}
			var all []float64 // every room's time to attach, over the restarts
			for i := range o.restarts {
				time.Sleep(o.settle) // pacing the restarts, not waiting for a condition
				r, err := restartRoom(ctx, room, socks, o.down)
				if err != nil {
					return err
				}
				all = append(all, r.sinceUp...)
				t.row(fmt.Sprintf("%s, restart %d", v.name, i+1), r.restart.Seconds()*1000, float64(len(r.sinceUp)),
					r.spread(), r.window(), r.pct(50), r.pct(99), r.pct(100), r.cpuPeak, r.load)
				benchStage("%s restart %d: replica back after %v, %d of %d rooms attached, p99 %.0f ms, spread %.0f ms, Room CPU peak %.2f cores",
					v.name, i+1, r.restart.Round(time.Millisecond), len(r.sinceUp), len(socks), r.pct(99), r.spread(), r.cpuPeak)
			}
			l := &benchLatencies{}
			for _, ms := range all {
				l.add(time.Duration(ms * float64(time.Millisecond)))
			}
			rep.add("reattach_p99_"+strings.Fields(v.name)[0], v.name+": p99 time to attach again over every restart", l.percentile(99), "ms")
			return nil
		}()
		if err != nil {
			return err
		}
	}
	rep.note("restart: SIGKILL until the new Room process accepts connections (-down of it spent down on purpose); spread: first to last room attached again; p1-p99: the 1st to the 99th percentile of the attach times; p50/p99/max: from the replica accepting connections until the room's socket gets its new state frame; Room CPU peak: the Room process's user+system CPU over its busiest 100 ms after the restart (/proc, 10 ms ticks)")
	return nil
}

// createRooms creates n practice rooms through the Lobby and returns their codes.
func createRooms(ctx context.Context, lobby lobbyv1.LobbyServiceClient, n int) ([]string, error) {
	out := make([]string, n)
	g, ctx := errgroup.WithContext(ctx)
	g.SetLimit(8)
	for i := range n {
		g.Go(func() error {
			var err error
			for range 5 { // a create that timed out under the machine's load is tried again
				var res *lobbyv1.CreateRoomResponse
				res, err = lobby.CreateRoom(ctx, &lobbyv1.CreateRoomRequest{Name: fmt.Sprintf("Re-attach %d", i), Video: &lobbyv1.Video{Title: "v", DurationMs: 215_000}})
				if err == nil {
					out[i] = res.GetCode()
					return nil
				}
				if status.Code(err) != codes.Unavailable {
					return err
				}
			}
			return err
		})
	}
	return out, g.Wait()
}

// viewer is one room's socket and the times it received a state frame.
type viewer struct {
	c      *websocket.Conn
	mu     sync.Mutex
	states []time.Time
}

func (v *viewer) stateAfter(t time.Time) (time.Time, bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	for _, s := range v.states {
		if s.After(t) {
			return s, true
		}
	}
	return time.Time{}, false
}

var stateMark = []byte(`{"type":"state"`)

// openViewers opens one viewer socket on each room and waits for each one's first state.
func openViewers(ctx context.Context, base string, codes []string) ([]*viewer, error) {
	socks := make([]*viewer, len(codes))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(16)
	for i, code := range codes {
		g.Go(func() error {
			var c *websocket.Conn
			var err error
			for range 5 { // a socket refused under the machine's load (503) is tried again
				if c, _, err = websocket.Dial(gctx, base+"/rooms/"+code+"/websocket?role=viewer&clientId="+fmt.Sprintf("v%d", i), nil); err == nil {
					break
				}
			}
			if err != nil {
				return fmt.Errorf("room %s: %w", code, err)
			}
			c.SetReadLimit(1 << 20)
			v := &viewer{c: c}
			socks[i] = v
			go func() {
				for {
					_, data, err := c.Read(context.Background())
					if err != nil {
						return
					}
					if bytes.HasPrefix(data, stateMark) {
						v.mu.Lock()
						v.states = append(v.states, time.Now())
						v.mu.Unlock()
					}
				}
			}()
			return nil
		})
	}
	err := g.Wait()
	var open []*viewer
	for _, s := range socks {
		if s != nil {
			open = append(open, s)
		}
	}
	if err != nil {
		return open, err
	}
	deadline := time.Now().Add(time.Minute)
	for _, s := range open {
		for {
			if _, ok := s.stateAfter(time.Time{}); ok {
				break
			}
			if time.Now().After(deadline) {
				return open, errors.New("not every socket got its first state within a minute")
			}
			time.Sleep(10 * time.Millisecond) // polling the sockets' readers
		}
	}
	return open, nil
}

// restartResult is one restart's measurements.
type restartResult struct {
	restart time.Duration
	sinceUp []float64 // ms from the replica listening to each room attached again, sorted
	at      []time.Time
	cpuPeak float64
	load    float64
}

func (r restartResult) pct(p float64) float64 {
	if len(r.sinceUp) == 0 {
		return 0
	}
	rank := int(p/100*float64(len(r.sinceUp))+0.999999) - 1
	return r.sinceUp[min(max(rank, 0), len(r.sinceUp)-1)]
}

func (r restartResult) spread() float64 { return r.pct(100) - r.sinceUp[0] }
func (r restartResult) window() float64 { return r.pct(99) - r.pct(1) }

// restartRoom SIGKILLs the Room replica, starts it again after down, and waits (up to 30 s) until every
// socket has a state frame from after the kill, sampling the new process's CPU every 10 ms.
func restartRoom(ctx context.Context, room *child, socks []*viewer, down time.Duration) (restartResult, error) {
	var r restartResult
	killed := time.Now()
	room.stop(syscall.SIGKILL)
	time.Sleep(down) // the replica stays down this long, as a container's restart does
	if err := room.start(ctx); err != nil {
		return r, err
	}
	up := time.Now()
	r.restart = up.Sub(killed)
	type tick struct {
		at  time.Time
		cpu time.Duration
	}
	var ticks []tick
	deadline := up.Add(30 * time.Second)
	attached := 0
	for attached < len(socks) && time.Now().Before(deadline) {
		ticks = append(ticks, tick{time.Now(), procCPU(room.pid())})
		time.Sleep(10 * time.Millisecond) // the CPU sampling period
		attached = 0
		for _, s := range socks {
			if _, ok := s.stateAfter(killed); ok {
				attached++
			}
		}
	}
	for end := time.Now().Add(200 * time.Millisecond); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
		ticks = append(ticks, tick{time.Now(), procCPU(room.pid())})
	}
	for _, s := range socks {
		if at, ok := s.stateAfter(killed); ok {
			r.sinceUp = append(r.sinceUp, float64(at.Sub(up))/float64(time.Millisecond))
			r.at = append(r.at, at)
		}
	}
	slices.Sort(r.sinceUp)
	for i := range ticks {
		for j := i + 1; j < len(ticks); j++ {
			if d := ticks[j].at.Sub(ticks[i].at); d >= 100*time.Millisecond {
				r.cpuPeak = max(r.cpuPeak, float64(ticks[j].cpu-ticks[i].cpu)/float64(d))
				break
			}
		}
	}
	fmt.Sscanf(benchLoadAverage(), "%g", &r.load)
	if len(r.sinceUp) == 0 {
		return r, fmt.Errorf("no room attached again within 30 s of the Room replica's restart")
	}
	return r, nil
}

// child is a process the benchmark starts, stops and starts again on the same address.
type child struct {
	name, bin, addr string
	args            []string

	mu     sync.Mutex
	cmd    *exec.Cmd
	exited chan struct{}
}

func (c *child) pid() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cmd == nil || c.cmd.Process == nil {
		return 0
	}
	return c.cmd.Process.Pid
}

// start runs the child and waits (up to 30 s) until its address accepts connections.
func (c *child) start(ctx context.Context) error {
	cmd := exec.Command(c.bin, c.args...)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", c.name, err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	c.mu.Lock()
	c.cmd, c.exited = cmd, exited
	c.mu.Unlock()
	deadline := time.Now().Add(30 * time.Second)
	for {
		if conn, err := net.DialTimeout("tcp", c.addr, time.Second); err == nil {
			_ = conn.Close()
			return nil
		}
		select {
		case <-exited:
			return fmt.Errorf("%s exited at start", c.name)
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(5 * time.Millisecond): // waiting for the child to listen
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s did not listen on %s within 30s", c.name, c.addr)
		}
	}
}

// stop sends sig and waits for the child to exit (SIGKILL 10 s later).
func (c *child) stop(sig os.Signal) {
	c.mu.Lock()
	cmd, exited := c.cmd, c.exited
	c.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Signal(sig)
	select {
	case <-exited:
	case <-time.After(10 * time.Second):
		_ = cmd.Process.Kill()
		<-exited
	}
}
