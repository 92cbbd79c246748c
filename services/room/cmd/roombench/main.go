// Command roombench measures the lobby domain on a real Redis: how soon an occupancy change
// (a viewer's socket joining or leaving through the gateway) shows in the Lobby, alone and with
// many rooms churning at once, and how long listing 10,000 rooms takes over gRPC and over
// HTTP. It runs the Lobby, a Room replica and the gateway in-process; results are for
// docs/BENCHMARKS.md. It is not part of the test suite.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"runtime/pprof"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/coder/websocket"
	"golang.org/x/sync/errgroup"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/vigil-dev/vigil/gateway"
	lobbyv1 "github.com/vigil-dev/vigil/pkg/api/vigil/lobby/v1"
	"github.com/vigil-dev/vigil/pkg/redisx"
	lobbyservice "github.com/vigil-dev/vigil/services/lobby/service"
	roomservice "github.com/vigil-dev/vigil/services/room/service"
)

func main() {
	redisURL := flag.String("redis-url", "redis://127.0.0.1:6379/0", "Redis to benchmark on (keys under a fresh prefix)")
	churn := flag.Int("churn", 500, "joins and leaves per room in the churn runs")
	parallel := flag.Int("parallel", 16, "rooms churning at once in the loaded run")
	rooms := flag.Int("rooms", 10000, "rooms in the lobby for the listing run")
	lists := flag.Int("lists", 200, "listings to time")
	cpuProfile := flag.String("cpuprofile", "", "write a CPU profile of the whole run here")
	flag.Parse()
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err == nil {
			err = pprof.StartCPUProfile(f)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "roombench:", err)
			os.Exit(1)
		}
		defer pprof.StopCPUProfile()
	}
	if err := run(*redisURL, *churn, *parallel, *rooms, *lists); err != nil {
		pprof.StopCPUProfile()
		fmt.Fprintln(os.Stderr, "roombench:", err)
		os.Exit(1)
	}
}

func run(redisURL string, churn, parallel, rooms, lists int) error {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	log := slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError}))
	prefix := fmt.Sprintf("bench-%d", time.Now().UnixNano())
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	start := func(name string, f func(ready func(net.Addr)) error) string {
		addr := make(chan string, 1)
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := f(func(a net.Addr) { addr <- a.String() }); err != nil {
				fmt.Fprintln(os.Stderr, name+":", err)
				os.Exit(1)
			}
		}()
		return <-addr
	}
	lobbyAddr := start("lobby", func(ready func(net.Addr)) error {
		svc, err := lobbyservice.New(ctx, lobbyservice.Options{Redis: redisx.Config{URL: redisURL}, Prefix: prefix, Logger: log})
		if err != nil {
			return err
		}
		ready(svc.Addr())
		return svc.Serve(ctx)
	})
	roomAddr := start("room", func(ready func(net.Addr)) error {
		svc, err := roomservice.New(ctx, roomservice.Options{Redis: redisx.Config{URL: redisURL}, Prefix: prefix, LobbyAddr: lobbyAddr, Logger: log})
		if err != nil {
			return err
		}
		ready(svc.Addr())
		return svc.Serve(ctx)
	})
	gwAddr := start("gateway", func(ready func(net.Addr)) error {
		return gateway.Run(ctx, gateway.Options{Addr: "127.0.0.1:0", Backends: gateway.Backends{Lobby: lobbyAddr, Room: roomAddr}, Logger: log}, ready)
	})
	conn, err := grpc.NewClient(lobbyAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	defer conn.Close()
	lobby := lobbyv1.NewLobbyServiceClient(conn)
	gw := "http://" + gwAddr

	fmt.Printf("occupancy change -> visible in the lobby's list (viewer sockets through the gateway; ListRooms polled every 1 ms)\n")
	wctx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	w := watch(wctx, lobby)
	c0 := cpuTime()
	one, err := churnRoom(ctx, lobby, w, gw, churn, "solo")
	if err != nil {
		return err
	}
	report("1 room, sequential", one)
	fmt.Println(cpuPer(c0, len(one)))
	var mu sync.Mutex
	var all []time.Duration
	g, gctx := errgroup.WithContext(ctx)
	for i := range parallel {
		g.Go(func() error {
			d, err := churnRoom(gctx, lobby, w, gw, churn, fmt.Sprintf("p%d", i))
			mu.Lock()
			all = append(all, d...)
			mu.Unlock()
			return err
		})
	}
	began, c1 := time.Now(), cpuTime()
	if err := g.Wait(); err != nil {
		return err
	}
	report(fmt.Sprintf("%d rooms at once (%.0f changes/s)", parallel, float64(len(all))/time.Since(began).Seconds()), all)
	fmt.Println(cpuPer(c1, len(all)))
	w.mu.Lock()
	if w.failures > 0 || dialFailures.Load() > 0 {
		fmt.Printf("  (%d lobby polls and %d socket dials failed under load and were retried)\n", w.failures, dialFailures.Load())
	}
	w.mu.Unlock()

	stopWatch()
	fmt.Printf("\nlisting %d rooms\n", rooms)
	if err := fill(ctx, lobby, rooms); err != nil {
		return err
	}
	codes, err := allCodes(ctx, lobby)
	if err != nil {
		return err
	}
	if _, err := lobby.ListRooms(ctx, &lobbyv1.ListRoomsRequest{}); err != nil { // warm the cache
		return err
	}
	for _, rate := range []int{0, 500} {
		stop := make(chan struct{})
		var bg sync.WaitGroup
		if rate > 0 {
			bg.Add(1)
			go func() { defer bg.Done(); touchAtRate(ctx, lobby, codes, rate, stop) }()
		}
		c2 := cpuTime()
		grpcTimes, n, gFailed := timeGRPCList(ctx, lobby, lists)
		gCPU := cpuPer(c2, len(grpcTimes))
		c3 := cpuTime()
		httpTimes, size, hFailed := timeHTTPList(gw, lists)
		hCPU := cpuPer(c3, len(httpTimes))
		close(stop)
		bg.Wait()
		during := "unchanged lobby"
		if rate > 0 {
			during = fmt.Sprintf("%d room changes/s", rate)
		}
		report(fmt.Sprintf("ListRooms over gRPC, %d rooms, %s (%d failed)", n, during, gFailed), grpcTimes)
		fmt.Println(gCPU)
		report(fmt.Sprintf("GET /lobby/rooms (%d KiB), %s (%d failed)", size>>10, during, hFailed), httpTimes)
		fmt.Println(hCPU)
	}
	return nil
}

func allCodes(ctx context.Context, lobby lobbyv1.LobbyServiceClient) ([]string, error) {
	res, err := lobby.ListRooms(ctx, &lobbyv1.ListRoomsRequest{})
	if err != nil {
		return nil, err
	}
	codes := make([]string, 0, len(res.GetRooms()))
	for _, r := range res.GetRooms() {
		codes = append(codes, r.GetCode())
	}
	return codes, nil
}

// touchAtRate reports leader activity in random rooms at rate per second until stop closes:
// every touch is a change the listing has to pick up.
func touchAtRate(ctx context.Context, lobby lobbyv1.LobbyServiceClient, codes []string, rate int, stop <-chan struct{}) {
	t := time.NewTicker(time.Second / time.Duration(rate))
	defer t.Stop()
	for i := 0; ; i++ {
		select {
		case <-stop:
			return
		case <-t.C:
		}
		_, _ = lobby.TouchRoom(ctx, &lobbyv1.TouchRoomRequest{Code: codes[(i*7919)%len(codes)], At: time.Now().UnixMilli()})
	}
}

func timeGRPCList(ctx context.Context, lobby lobbyv1.LobbyServiceClient, n int) ([]time.Duration, int, int) {
	var ds []time.Duration
	var rooms, failed int
	for range n {
		t0 := time.Now()
		res, err := lobby.ListRooms(ctx, &lobbyv1.ListRoomsRequest{})
		if err != nil {
			failed++ // timed out under the machine's load; counted, not timed
			continue
		}
		ds = append(ds, time.Since(t0))
		rooms = len(res.GetRooms())
	}
	return ds, rooms, failed
}

func timeHTTPList(gw string, n int) ([]time.Duration, int, int) {
	var ds []time.Duration
	var size, failed int
	for range n {
		t0 := time.Now()
		res, err := http.Get(gw + "/lobby/rooms")
		if err != nil {
			failed++
			continue
		}
		body, err := io.ReadAll(res.Body)
		res.Body.Close()
		if err != nil || res.StatusCode != http.StatusOK {
			failed++
			continue
		}
		ds = append(ds, time.Since(t0))
		size = len(body)
	}
	return ds, size, failed
}

// watcher polls the lobby's list every millisecond, as a lobby page would, and wakes the
// churners waiting for a room's count: one light poller instead of one per room.
type watcher struct {
	mu       sync.Mutex
	cond     *sync.Cond
	viewers  map[string]int32
	failures int
}

func watch(ctx context.Context, lobby lobbyv1.LobbyServiceClient) *watcher {
	w := &watcher{viewers: map[string]int32{}}
	w.cond = sync.NewCond(&w.mu)
	go func() {
		for ctx.Err() == nil {
			res, err := lobby.ListRooms(ctx, &lobbyv1.ListRoomsRequest{})
			if err != nil {
				// A failed poll (the store timed out under load) is counted and retried; the
				// churners' times include the wait.
				w.mu.Lock()
				w.failures++
				w.mu.Unlock()
				time.Sleep(time.Millisecond)
				continue
			}
			w.mu.Lock()
			for _, r := range res.GetRooms() {
				w.viewers[r.GetCode()] = r.GetViewers()
			}
			w.cond.Broadcast()
			w.mu.Unlock()
			time.Sleep(time.Millisecond) // poll interval: the resolution of the measurement
		}
	}()
	return w
}

// waitFor waits until the lobby's list shows the room with viewers, and returns the time
// since t0.
func (w *watcher) waitFor(code string, viewers int32, t0 time.Time) (time.Duration, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for w.viewers[code] != viewers {
		if time.Since(t0) > 10*time.Second {
			return 0, fmt.Errorf("room %s: %d viewers after 10s, want %d", code, w.viewers[code], viewers)
		}
		w.cond.Wait()
	}
	return time.Since(t0), nil
}

// churnRoom opens a room with its leader, then joins and leaves viewers one after another, and
// times each change until GetRoom shows it.
func churnRoom(ctx context.Context, lobby lobbyv1.LobbyServiceClient, w *watcher, gw string, n int, name string) ([]time.Duration, error) {
	created, err := lobby.CreateRoom(ctx, &lobbyv1.CreateRoomRequest{Name: name, Video: &lobbyv1.Video{Title: "v", DurationMs: 1000}})
	if err != nil {
		return nil, err
	}
	code := created.GetCode()
	ws := "ws" + strings.TrimPrefix(gw, "http") + "/rooms/" + code + "/websocket?"
	leader, _, err := websocket.Dial(ctx, ws+"role=leader&clientId=lead&token="+created.GetLeaderToken(), nil)
	if err != nil {
		return nil, err
	}
	defer leader.CloseNow()
	go drain(leader)
	if _, err := w.waitFor(code, 0, time.Now()); err != nil {
		return nil, err
	}
	var out []time.Duration
	var open []*websocket.Conn
	for i := range n {
		// Up to 5 viewers at a time: join until 5, then leave and join alternately.
		if len(open) == 5 {
			t0 := time.Now()
			c := open[0]
			open = open[1:]
			_ = c.Close(websocket.StatusNormalClosure, "")
			d, err := w.waitFor(code, int32(len(open)), t0)
			if err != nil {
				return nil, err
			}
			out = append(out, d)
		}
		t0 := time.Now()
		c, err := dialRetrying(ctx, ws+fmt.Sprintf("role=viewer&clientId=v%d", i))
		if err != nil {
			return nil, err
		}
		go drain(c)
		open = append(open, c)
		d, err := w.waitFor(code, int32(len(open)), t0)
		if err != nil {
			return nil, err
		}
		out = append(out, d)
	}
	for _, c := range open {
		_ = c.CloseNow()
	}
	return out, nil
}

// dialRetrying opens a viewer socket, retrying a few times when the stack refuses it under
// the machine's load (a store call timed out: 503); the time to the count includes retries.
func dialRetrying(ctx context.Context, url string) (*websocket.Conn, error) {
	var err error
	for range 5 {
		var c *websocket.Conn
		if c, _, err = websocket.Dial(ctx, url, nil); err == nil {
			return c, nil
		}
		dialFailures.Add(1)
	}
	return nil, err
}

var dialFailures atomic.Int64

func drain(c *websocket.Conn) {
	for {
		if _, _, err := c.Read(context.Background()); err != nil {
			return
		}
	}
}

func fill(ctx context.Context, lobby lobbyv1.LobbyServiceClient, n int) error {
	g, ctx := errgroup.WithContext(ctx)
	g.SetLimit(32)
	for i := range n {
		g.Go(func() error {
			_, err := lobby.CreateRoom(ctx, &lobbyv1.CreateRoomRequest{
				Name: fmt.Sprintf("Practice room %d", i), Video: &lobbyv1.Video{Title: "Routine for the spring show", DurationMs: 215_000},
			})
			return err
		})
	}
	return g.Wait()
}

// cpuTime is the process's user+system CPU time so far: every service of the run is in this
// process, so CPU per operation is the whole stack's (gateway, Room, Lobby; not Redis).
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func cpuPer(start time.Duration, ops int) string {
	if ops == 0 {
		return ""
	}
	return fmt.Sprintf("  (%v CPU/op)", ((cpuTime() - start) / time.Duration(ops)).Round(time.Microsecond))
}

func report(what string, ds []time.Duration) {
	slices.Sort(ds)
	q := func(p float64) time.Duration { return ds[min(len(ds)-1, int(p*float64(len(ds))))] }
	fmt.Printf("  %-60s n=%-6d p50 %-10v p99 %-10v max %v\n", what, len(ds), q(0.50).Round(10*time.Microsecond), q(0.99).Round(10*time.Microsecond), ds[len(ds)-1].Round(10*time.Microsecond))
}
