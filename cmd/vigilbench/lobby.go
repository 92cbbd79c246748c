package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"
	"golang.org/x/sync/errgroup"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/vigil-dev/vigil/gateway"
	lobbyv1 "github.com/vigil-dev/vigil/pkg/api/vigil/lobby/v1"
	"github.com/vigil-dev/vigil/pkg/grpcdial"
	"github.com/vigil-dev/vigil/pkg/redisx"
	"github.com/vigil-dev/vigil/pkg/server"
	lobbyservice "github.com/vigil-dev/vigil/services/lobby/service"
	roomservice "github.com/vigil-dev/vigil/services/room/service"
)

// lobbyBench are the settings of `vigilbench lobby`.
type lobbyBench struct {
	churn    int
	parallel int
	// parallelLoads are the paced many-rooms runs' rates, as shares of the rate the rooms
	// reached as fast as they go.
	parallelLoads []float64
	rooms         int
	processes     bool
	lists         int
	touchRate     int
	ceiling       bool
	redis         ceilingFlags
}

// benchLobby measures the lobby domain through the real Lobby, one Room replica and the
// gateway: how soon an occupancy change (a viewer's socket joining or leaving through the
// gateway) shows in the Lobby's list, for one room and with many rooms churning at once, and
// how long listing 10,000 rooms takes over gRPC and over HTTP, with the lobby unchanged and
// with rooms changing meanwhile.
func benchLobby(ctx context.Context, h *Harness, fs *flag.FlagSet, args []string) error {
	var o lobbyBench
	fs.IntVar(&o.churn, "churn", 500, "viewer joins and leaves per room in the churn runs (0 skips them)")
	fs.IntVar(&o.parallel, "parallel", 16, "rooms churning at once in the loaded churn run")
	loads := fs.String("parallel-loads", "0.1,0.5", "the paced runs' change rates, as shares of the rate the rooms reached as fast as they go (empty: none)")
	fs.IntVar(&o.rooms, "rooms", 10000, "rooms added to the lobby for the listing runs (0 skips them)")
	fs.IntVar(&o.lists, "lists", 200, "listings timed per way (gRPC, HTTP) and condition")
	fs.IntVar(&o.touchRate, "touch-rate", 500, "room changes per second during the second listing run, and where the ceiling run starts")
	fs.BoolVar(&o.processes, "processes", false, "run the Lobby, the Room service and the gateway as processes of their own, built from their cmd packages (as deployed), instead of in this process")
	fs.BoolVar(&o.ceiling, "ceiling", true, "after the listings, double the change rate until a page's p99 passes 10 ms (needs -rooms)")
	o.redis.register(fs)
	if err := parseBenchFlags(fs, args); err != nil {
		return err
	}
	for f := range strings.SplitSeq(*loads, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		load, err := strconv.ParseFloat(f, 64)
		if err != nil || load <= 0 || load > 1 {
			return fmt.Errorf("%w: --parallel-loads are shares of the rate as fast as they go, each above 0 and at most 1 (got %q)", errUsage, f)
		}
		o.parallelLoads = append(o.parallelLoads, load)
	}
	if o.churn < 0 || o.parallel <= 0 || o.rooms < 0 || o.lists <= 0 || o.touchRate <= 0 {
		return fmt.Errorf("%w: --parallel, --lists and --touch-rate must be positive, --churn and --rooms not negative", errUsage)
	}
	b, err := h.Redis(ctx)
	if err != nil {
		return err
	}
	rep := h.Report
	rep.Settings["churn"] = o.churn
	rep.Settings["parallel"] = o.parallel
	rep.Settings["rooms"] = o.rooms
	rep.Settings["lists"] = o.lists
	rep.Settings["touch_rate"] = o.touchRate
	rep.Settings["processes"] = o.processes

	start := startLobbyStack
	if o.processes {
		start = startLobbyProcesses
	}
	st, err := start(ctx, h, b.url)
	if err != nil {
		return err
	}
	if o.churn > 0 {
		if err := st.benchChurn(ctx, rep, o); err != nil {
			return err
		}
	}
	if o.rooms > 0 {
		if err := st.benchListing(ctx, rep, o); err != nil {
			return err
		}
	}
	if o.rooms > 0 && o.ceiling {
		var lobbyCeiling float64
		raw, err := withCeilings(ctx, b, h, o.redis, func() error {
			var err error
			lobbyCeiling, err = st.benchCeiling(ctx, rep, o)
			return err
		})
		if err != nil {
			return err
		}
		if raw.unpipelined > 0 {
			rep.add("lobby_ceiling_ratio", "the lobby's change ceiling / raw EVALSHA ceiling (unpipelined) of the same run", lobbyCeiling/raw.unpipelined, "x")
		}
	}
	if o.processes {
		rep.note("CPU/op is the user+system CPU per operation of the stack's processes (gateway, Room, Lobby) and of this one (the benchmark's clients and poller), not Redis")
	} else {
		rep.note("CPU/op is this process's user+system CPU per operation: the whole stack (gateway, Room, Lobby) plus the benchmark's clients and poller, not Redis")
	}
	return nil
}

// lobbyStack is the Lobby, a Room replica and the gateway, started by the harness.
type lobbyStack struct {
	lobby        lobbyv1.LobbyServiceClient
	gw           string
	http         *http.Client
	dialFailures atomic.Int64
	// cpu is the CPU time the stack and the benchmark have used so far.
	cpu func() time.Duration
}

func startLobbyStack(ctx context.Context, h *Harness, redisURL string) (*lobbyStack, error) {
	lobby, err := lobbyservice.New(ctx, lobbyservice.Options{Core: server.Core{Redis: redisx.Config{URL: redisURL}, Prefix: h.Prefix, Logger: quiet("lobby")}})
	if err != nil {
		return nil, fmt.Errorf("lobby service: %w", err)
	}
	lobbyAddr := h.Serve(ctx, "lobby", lobby)
	room, err := roomservice.New(ctx, roomservice.Options{Core: server.Core{Redis: redisx.Config{URL: redisURL}, Prefix: h.Prefix, Logger: quiet("room")}, LobbyAddr: lobbyAddr})
	if err != nil {
		return nil, fmt.Errorf("room service: %w", err)
	}
	roomAddr := h.Serve(ctx, "room", room)
	st := &lobbyStack{cpu: processCPU}
	if st.gw, st.http, err = h.Gateway(ctx, gateway.Backends{Lobby: lobbyAddr, Room: roomAddr}); err != nil {
		return nil, err
	}
	if err := st.dialLobby(h, lobbyAddr); err != nil {
		return nil, err
	}
	benchStage("lobby on %s, room replica on %s, gateway on %s (in process)", lobbyAddr, roomAddr, st.gw)
	return st, nil
}

// startLobbyProcesses starts the Lobby, a Room replica and the gateway as processes of their
// own, built from services/lobby/cmd/lobby, services/room/cmd/room and gateway/cmd/gateway,
// on loopback ports, logging warnings only, with no rate limits and no metrics listener but
// the gateway's (it requires one).
func startLobbyProcesses(ctx context.Context, h *Harness, redisURL string) (*lobbyStack, error) {
	bins, cleanup, err := buildCommands(ctx, "services/lobby/cmd/lobby", "services/room/cmd/room", "gateway/cmd/gateway")
	if err != nil {
		return nil, err
	}
	h.stack.onStop(cleanup)
	var addrs [4]string
	for i := range addrs {
		if addrs[i], err = freeAddr(); err != nil {
			return nil, err
		}
	}
	lobbyAddr, roomAddr, gwAddr, gwMetrics := addrs[0], addrs[1], addrs[2], addrs[3]
	common := []string{"-redis-url", redisURL, "-prefix", h.Prefix, "-metrics-addr", "", "-log-format", "text", "-log-level", "warn"}
	if err := h.Process(ctx, "lobby", bins[0], lobbyAddr, append([]string{"-grpc-addr", lobbyAddr}, common...)...); err != nil {
		return nil, err
	}
	if err := h.Process(ctx, "room", bins[1], roomAddr, append([]string{"-grpc-addr", roomAddr, "-lobby-addr", lobbyAddr}, common...)...); err != nil {
		return nil, err
	}
	if err := h.Process(ctx, "gateway", bins[2], gwAddr, "-addr", gwAddr, "-metrics-addr", gwMetrics, "-lobby-addr", lobbyAddr, "-room-addr", roomAddr,
		"-rate-limit", "-1", "-log-format", "text", "-log-level", "warn"); err != nil {
		return nil, err
	}
	st := &lobbyStack{gw: "http://" + gwAddr, http: benchHTTPClient(), cpu: h.children.cpu}
	if err := waitHTTP(ctx, st.http, st.gw+"/healthz"); err != nil {
		return nil, err
	}
	if err := st.dialLobby(h, lobbyAddr); err != nil {
		return nil, err
	}
	benchStage("lobby on %s, room replica on %s, gateway on %s (separate processes)", lobbyAddr, roomAddr, st.gw)
	return st, nil
}

// dialLobby gives the benchmark its own gRPC client of the Lobby.
func (st *lobbyStack) dialLobby(h *Harness, addr string) error {
	conn, err := grpcdial.New(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	h.stack.onStop(func() { _ = conn.Close() })
	st.lobby = lobbyv1.NewLobbyServiceClient(conn)
	return nil
}

// lobbyColumns are the columns of the lobby benchmark's tables.
var lobbyColumns = []benchColumn{{"n", "ops"}, {"p50", "ms"}, {"p99", "ms"}, {"max", "ms"}, {"CPU/op", "ms"}}

// row adds timed operations and the CPU they cost since cpu0 as a row of t.
// extra values follow those of lobbyColumns.
func (st *lobbyStack) row(t *benchTable, name string, l *benchLatencies, cpu0 time.Duration, extra ...float64) {
	n := l.len()
	cpu := 0.0
	if n > 0 {
		cpu = float64(st.cpu()-cpu0) / float64(time.Millisecond) / float64(n)
	}
	t.row(name, append([]float64{float64(n), l.percentile(50), l.percentile(99), l.percentile(100), cpu}, extra...)...)
}

// benchChurn times occupancy changes until the lobby's list shows them: one room churning
// alone, then o.parallel rooms at once, as fast as they go and then paced at shares of that
// rate. The paced runs tell load from concurrency: at a tenth of the rate, 16 rooms together
// change less often than one room alone does.
func (st *lobbyStack) benchChurn(ctx context.Context, rep *benchReport, o lobbyBench) error {
	t := rep.table("occupancy", "Occupancy change → visible in the lobby's list (viewer sockets through the gateway; ListRooms polled every 1 ms)", lobbyColumns...)
	wctx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	w := watch(wctx, st.lobby)

	benchStage("churn: 1 room, %d changes", o.churn)
	one, err := st.churnRooms(ctx, rep, w, 1, o.churn, "one", "1 room", nil)
	if err != nil {
		return err
	}
	st.row(t, "1 room, sequential", one.changes, one.cpu)
	runs := []*churnTimes{one}

	benchStage("churn: %d rooms at once, %d changes each, as fast as they go", o.parallel, o.churn)
	fast, err := st.churnRooms(ctx, rep, w, o.parallel, o.churn, "parallel", fmt.Sprintf("%d rooms at once, as fast as they go", o.parallel), nil)
	if err != nil {
		return err
	}
	st.row(t, fast.name, fast.changes, fast.cpu)
	rep.add("churn_parallel_rate", fmt.Sprintf("occupancy changes/s, %s", fast.name), fast.rate, "changes/s")
	// The bound: many rooms churning at once within 2× of one room's p99, same run.
	rep.ratio("churn_parallel_vs_one_p99", fmt.Sprintf("occupancy change → lobby p99, %s / 1 room", fast.name), fast.changes.percentile(99), one.changes.percentile(99))
	runs = append(runs, fast)
	for _, load := range o.parallelLoads {
		// A share of the rate the rooms reached as fast as they go, so that a run means the
		// same on a faster or a slower machine.
		target := fast.rate * load
		benchStage("churn: %d rooms at once, %d changes each, %.0f changes/s in all", o.parallel, o.churn, target)
		every := time.Duration(float64(o.parallel) / target * float64(time.Second))
		paced, err := st.churnRooms(ctx, rep, w, o.parallel, o.churn, fmt.Sprintf("paced_%.0f", 100*load), fmt.Sprintf("%d rooms at once, paced at %.0f%% of that", o.parallel, 100*load), &pacing{every: every})
		if err != nil {
			return err
		}
		st.row(t, paced.name, paced.changes, paced.cpu)
		rep.add(fmt.Sprintf("churn_paced_%.0f_rate", 100*load), fmt.Sprintf("occupancy changes/s, %s", paced.name), paced.rate, "changes/s")
		rep.ratio(fmt.Sprintf("churn_paced_%.0f_vs_one_p99", 100*load), fmt.Sprintf("occupancy change → lobby p99, %s / 1 room", paced.name), paced.changes.percentile(99), one.changes.percentile(99))
		runs = append(runs, paced)
	}
	// A join's time in two parts: until the socket's answer (the gateway admitted it and the
	// Room service counted it), and from there until the lobby's list shows it (the Lobby's
	// part). No CPU column: the time is not split.
	for _, r := range runs {
		t.row(r.name+", joins: dial → socket answered", float64(r.answered.len()), r.answered.percentile(50), r.answered.percentile(99), r.answered.percentile(100))
		t.row(r.name+", joins: socket answered → lobby's list", float64(r.afterAnswer.len()), r.afterAnswer.percentile(50), r.afterAnswer.percentile(99), r.afterAnswer.percentile(100))
	}
	if f, d := w.failed(), st.dialFailures.Load(); f > 0 || d > 0 {
		rep.note("%d lobby polls and %d socket dials failed under load and were retried (the times include the retries)", f, d)
	}
	return nil
}

// churnTimes are one churn run's times: each change until the lobby's list shows it, and
// each join's until the socket's answer and from there.
type churnTimes struct {
	name                           string
	changes, answered, afterAnswer *benchLatencies
	// cpu is the stack's CPU (lobbyStack.cpu) when the run began; rate its changes per second.
	cpu  time.Duration
	rate float64
}

// churnRooms churns rooms at once, each as fast as it goes or, with pace, each on its own
// schedule (offset from the others' so that they do not all change at the same instant), and
// reports the list poller's period during the run (the measurement's resolution).
func (st *lobbyStack) churnRooms(ctx context.Context, rep *benchReport, w *watcher, rooms, n int, key, name string, pace *pacing) (*churnTimes, error) {
	ct := &churnTimes{name: name, changes: new(benchLatencies), answered: new(benchLatencies), afterAnswer: new(benchLatencies)}
	g, gctx := errgroup.WithContext(ctx)
	began, polls := time.Now(), w.polled()
	ct.cpu = st.cpu()
	for i := range rooms {
		var p *pacing
		if pace != nil {
			p = &pacing{every: pace.every, offset: pace.every * time.Duration(i) / time.Duration(rooms)}
		}
		g.Go(func() error { return st.churnRoom(gctx, w, n, fmt.Sprintf("%s %d", name, i), p, ct) })
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	took := time.Since(began)
	ct.rate = float64(ct.changes.len()) / took.Seconds()
	rep.add("poll_period_"+key+"_ms", "the list poller's period, "+name, float64(took)/float64(time.Millisecond)/float64(max(w.polled()-polls, 1)), "ms")
	return ct, nil
}

// benchListing fills the lobby with o.rooms more rooms and times pages and searches over gRPC
// and over the gateway's HTTP, with the lobby unchanged and with o.touchRate room changes a
// second.
func (st *lobbyStack) benchListing(ctx context.Context, rep *benchReport, o lobbyBench) error {
	benchStage("listing: creating %d rooms", o.rooms)
	if err := fill(ctx, st.lobby, o.rooms); err != nil {
		return err
	}
	codes, deep, err := allCodes(ctx, st.lobby, o.rooms/2)
	if err != nil {
		return err
	}
	rep.add("listing_rooms", "rooms in the lobby for the listings", float64(len(codes)), "rooms")
	t := rep.table("listing", fmt.Sprintf("Pages of the lobby's %d rooms", len(codes)), append(append([]benchColumn(nil), lobbyColumns...), benchColumn{"failed", "ops"})...)
	paths := []struct {
		name, path string
		search     bool
	}{
		{"GET /lobby/rooms?limit=50, first page", "/lobby/rooms?limit=50", false},
		{fmt.Sprintf("GET /lobby/rooms?limit=50, page at room %d", o.rooms/2), "/lobby/rooms?limit=50&pageToken=" + url.QueryEscape(deep), false},
		{"GET /lobby/rooms?q=salsa+tue, search (1 room in 100 matches)", "/lobby/rooms?q=salsa+tue", true},
		{"GET /lobby/rooms?q=zzz, search matching nothing (scans every room)", "/lobby/rooms?q=zzz", true},
	}
	for _, rate := range []int{0, o.touchRate} {
		during := "unchanged lobby"
		if rate > 0 {
			during = fmt.Sprintf("%d room changes/s", rate)
		}
		benchStage("listing: %d pages each over gRPC and over HTTP, %s", o.lists, during)
		stop := make(chan struct{})
		var bg sync.WaitGroup
		if rate > 0 {
			bg.Go(func() { touchAtRate(ctx, st.lobby, codes, rate, stop, nil) })
		}
		c0 := st.cpu()
		grpcTimes, gFailed := timeGRPCList(ctx, st.lobby, o.lists)
		st.row(t, "ListRooms page of 50 over gRPC, "+during, grpcTimes, c0, float64(gFailed))
		var pages, searches benchLatencies
		for _, p := range paths {
			c1 := st.cpu()
			httpTimes, size, hFailed := st.timeHTTPGet(ctx, p.path, o.lists)
			st.row(t, p.name+", "+during, httpTimes, c1, float64(hFailed))
			if rate == 0 && strings.Contains(p.path, "limit=50&") {
				rep.add("page_json_kib", "a page of 50 rooms: body", float64(size)/1024, "KiB")
			}
			if p.search {
				searches.merge(httpTimes)
			} else {
				pages.merge(httpTimes)
			}
		}
		if rate > 0 {
			// The bounds at this rate: a page p99 ≤ 5 ms, a search p99 ≤ 10 ms.
			rep.add("page_p99_churn_ms", fmt.Sprintf("a page of 50 over REST (first and deep pages), %s: p99", during), pages.percentile(99), "ms")
			rep.add("search_p99_churn_ms", fmt.Sprintf("a search over REST (both searches), %s: p99", during), searches.percentile(99), "ms")
		}
		close(stop)
		bg.Wait()
	}
	return nil
}

// benchCeiling raises the rate of room changes, doubling it from o.touchRate, until a page of
// 50 over REST has a p99 above 10 ms, and reports the highest rate it kept up with below that.
// When already o.touchRate is too much, it halves the rate instead until one is kept (down
// to 1/64 of it), so the ceiling is found on either side of where it starts.
func (st *lobbyStack) benchCeiling(ctx context.Context, rep *benchReport, o lobbyBench) (float64, error) {
	codes, _, err := allCodes(ctx, st.lobby, 0)
	if err != nil {
		return 0, err
	}
	t := rep.table("ceiling", "Room changes/s against a page of 50 over REST (GET /lobby/rooms?limit=50)",
		benchColumn{"asked", "changes/s"}, benchColumn{"done", "changes/s"}, benchColumn{"p50", "ms"}, benchColumn{"p99", "ms"}, benchColumn{"failed", "ops"})
	// step runs one rate and reports the rate achieved and whether pages kept p99 ≤ 10 ms
	// while the stack kept up with at least 80 % of the rate asked.
	step := func(rate int) (float64, bool) {
		benchStage("ceiling: %d room changes/s asked, %d pages", rate, o.lists)
		stop := make(chan struct{})
		var done atomic.Int64
		var bg sync.WaitGroup
		bg.Go(func() { touchAtRate(ctx, st.lobby, codes, rate, stop, &done) })
		time.Sleep(200 * time.Millisecond) // let the rate settle before timing
		n0, t0 := done.Load(), time.Now()
		times, _, failed := st.timeHTTPGet(ctx, "/lobby/rooms?limit=50", o.lists)
		achieved := float64(done.Load()-n0) / time.Since(t0).Seconds()
		close(stop)
		bg.Wait()
		p99 := times.percentile(99)
		t.row(fmt.Sprintf("%d changes/s asked", rate), float64(rate), achieved, times.percentile(50), p99, float64(failed))
		return achieved, p99 <= 10 && failed == 0 && achieved >= float64(rate)*0.8
	}
	best := 0.0
	if achieved, ok := step(o.touchRate); ok {
		best = achieved
		for rate := o.touchRate * 2; rate <= 256_000; rate *= 2 {
			achieved, ok := step(rate)
			if !ok {
				break
			}
			best = achieved
		}
	} else {
		for rate := o.touchRate / 2; rate >= max(o.touchRate/64, 1); rate /= 2 {
			if achieved, ok := step(rate); ok {
				best = achieved
				break
			}
		}
	}
	rep.add("lobby_ceiling", "room changes/s a page of 50 keeps p99 ≤ 10 ms at (and the stack keeps up with)", best, "changes/s")
	return best, nil
}

// allCodes pages through the whole lobby, 200 rooms a page, and returns every code and the
// token of the page that starts after room at (or "" when at is 0 or past the end).
func allCodes(ctx context.Context, lobby lobbyv1.LobbyServiceClient, at int) ([]string, string, error) {
	var codes []string
	deep := ""
	req := &lobbyv1.ListRoomsRequest{PageSize: proto.Int32(200)}
	for {
		res, err := lobby.ListRooms(ctx, req)
		if err != nil {
			return nil, "", err
		}
		for _, r := range res.GetRooms() {
			codes = append(codes, r.GetCode())
		}
		if res.GetNextPageToken() == "" {
			return codes, deep, nil
		}
		req.PageToken = res.GetNextPageToken()
		if at > 0 && deep == "" && len(codes) >= at {
			deep = res.GetNextPageToken()
		}
	}
}

// touchAtRate reports leader activity in rooms at rate per second until stop closes: every
// touch is a change the listing has to pick up. The touches of each 5 ms go out at once, on
// up to 64 calls in flight, so a rate above what one caller's round trips allow is reached;
// done (when not nil) counts the touches that succeeded.
func touchAtRate(ctx context.Context, lobby lobbyv1.LobbyServiceClient, codes []string, rate int, stop <-chan struct{}, done *atomic.Int64) {
	const tick = 5 * time.Millisecond
	sem := make(chan struct{}, 64)
	var wg sync.WaitGroup
	defer wg.Wait()
	t := time.NewTicker(tick)
	defer t.Stop()
	began, sent := time.Now(), 0
	for {
		select {
		case <-stop:
			return
		case <-ctx.Done():
			return
		case <-t.C:
		}
		due := int(time.Since(began).Seconds() * float64(rate))
		for ; sent < due; sent++ {
			select {
			case sem <- struct{}{}:
			case <-stop:
				return
			}
			i := sent
			wg.Go(func() {
				defer func() { <-sem }()
				_, err := lobby.TouchRoom(ctx, &lobbyv1.TouchRoomRequest{Code: codes[(i*7919)%len(codes)], At: time.Now().UnixMilli()})
				if err == nil && done != nil {
					done.Add(1)
				}
			})
		}
	}
}

// timeGRPCList times n ListRooms calls of a page of 50; a call that fails (timed out under
// the machine's load) is counted, not timed.
func timeGRPCList(ctx context.Context, lobby lobbyv1.LobbyServiceClient, n int) (*benchLatencies, int) {
	var ds benchLatencies
	failed := 0
	for range n {
		t0 := time.Now()
		if _, err := lobby.ListRooms(ctx, &lobbyv1.ListRoomsRequest{}); err != nil {
			failed++
			continue
		}
		ds.add(time.Since(t0))
	}
	return &ds, failed
}

// timeHTTPGet times n GETs of path through the gateway and returns the body's size.
func (st *lobbyStack) timeHTTPGet(ctx context.Context, path string, n int) (*benchLatencies, int, int) {
	var ds benchLatencies
	size, failed := 0, 0
	for range n {
		t0 := time.Now()
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, st.gw+path, nil)
		if err != nil {
			return &ds, size, failed + 1
		}
		res, err := st.http.Do(req)
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
		ds.add(time.Since(t0))
		size = len(body)
	}
	return &ds, size, failed
}

// watcher polls the lobby's list every millisecond, as a lobby page would, and wakes the
// churners waiting for a room's count: one light poller instead of one per room.
type watcher struct {
	mu       sync.Mutex
	cond     *sync.Cond
	viewers  map[string]int32
	failures int
	polls    int
}

func watch(ctx context.Context, lobby lobbyv1.LobbyServiceClient) *watcher {
	w := &watcher{viewers: map[string]int32{}}
	w.cond = sync.NewCond(&w.mu)
	go func() {
		for ctx.Err() == nil {
			res, err := lobby.ListRooms(ctx, &lobbyv1.ListRoomsRequest{})
			w.mu.Lock()
			if err != nil {
				// A failed poll (the store timed out under load) is counted and retried; the
				// churners' times include the wait.
				w.failures++
			} else {
				for _, r := range res.GetRooms() {
					w.viewers[r.GetCode()] = r.GetViewers()
				}
				w.polls++
			}
			w.cond.Broadcast()
			w.mu.Unlock()
			time.Sleep(time.Millisecond) // poll interval: the resolution of the measurement
		}
	}()
	return w
}

// polled is how many polls have answered so far.
func (w *watcher) polled() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.polls
}

func (w *watcher) failed() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.failures
}

// waitFor waits until the lobby's list shows the room with viewers, for at most 10 seconds,
// and returns the time since t0 (a paced change's turn, which may have passed some time ago).
func (w *watcher) waitFor(code string, viewers int32, t0 time.Time) (time.Duration, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	deadline := time.Now().Add(10 * time.Second)
	for w.viewers[code] != viewers {
		if time.Now().After(deadline) {
			return 0, fmt.Errorf("room %s: %d viewers in the lobby after 10s, want %d", code, w.viewers[code], viewers)
		}
		w.cond.Wait()
	}
	return time.Since(t0), nil
}

// pacing spaces a room's changes: after an offset, change k starts at its turn,
// start + k·every, or as soon as the one before it has shown when that is later. A change
// that starts late because the one before it ran past its turn is timed from its turn, so
// the stack's slowness is not left out of the times; a change that waited for its turn is
// timed from when its goroutine woke (the benchmark's own timer lateness is not the stack's).
type pacing struct {
	every, offset time.Duration
}

// turns returns a function that waits for the next change's turn and returns the instant
// its time counts from; without pacing, every turn is now.
func (p *pacing) turns(ctx context.Context) func() time.Time {
	if p == nil {
		return time.Now
	}
	start, k := time.Now().Add(p.offset), 0
	return func() time.Time {
		at := start.Add(time.Duration(k) * p.every)
		k++
		d := time.Until(at)
		if d <= 0 {
			return at
		}
		select {
		case <-time.After(d):
		case <-ctx.Done():
		}
		return time.Now()
	}
}

// churnRoom opens a room with its leader, then joins and leaves viewers through the gateway,
// up to 5 at a time, and times each change until the lobby's list shows it (out) and, for
// joins, from the socket's answer (the join counted in the room) until then (afterAnswer).
// With pace, the changes keep to its schedule (the first waits for the room and its leader).
func (st *lobbyStack) churnRoom(ctx context.Context, w *watcher, n int, name string, pace *pacing, out *churnTimes) error {
	created, err := st.lobby.CreateRoom(ctx, &lobbyv1.CreateRoomRequest{Name: name, Video: &lobbyv1.Video{Title: "v", DurationMs: 1000}})
	if err != nil {
		return err
	}
	code := created.GetCode()
	ws := "ws" + strings.TrimPrefix(st.gw, "http") + "/rooms/" + code + "/websocket?"
	leader, _, err := websocket.Dial(ctx, ws+"role=leader&clientId=lead&token="+created.GetLeaderToken(), nil)
	if err != nil {
		return err
	}
	defer leader.CloseNow()
	go drain(leader)
	if _, err := w.waitFor(code, 0, time.Now()); err != nil {
		return err
	}
	var open []*websocket.Conn
	defer func() {
		for _, c := range open {
			_ = c.CloseNow()
		}
	}()
	turn := pace.turns(ctx)
	for i := range n {
		// Up to 5 viewers at a time: join until 5, then leave and join alternately.
		if len(open) == 5 {
			t0 := turn()
			c := open[0]
			open = open[1:]
			_ = c.Close(websocket.StatusNormalClosure, "")
			d, err := w.waitFor(code, int32(len(open)), t0)
			if err != nil {
				return err
			}
			out.changes.add(d)
		}
		t0 := turn()
		c, err := st.dialRetrying(ctx, ws+fmt.Sprintf("role=viewer&clientId=v%d", i))
		if err != nil {
			return err
		}
		answered := time.Since(t0)
		go drain(c)
		open = append(open, c)
		d, err := w.waitFor(code, int32(len(open)), t0)
		if err != nil {
			return err
		}
		out.changes.add(d)
		out.answered.add(answered)
		out.afterAnswer.add(max(d-answered, 0))
	}
	return nil
}

// dialRetrying opens a viewer socket, retrying a few times when the stack refuses it under
// the machine's load (a store call timed out: 503); the time to the count includes retries.
func (st *lobbyStack) dialRetrying(ctx context.Context, url string) (*websocket.Conn, error) {
	var err error
	for range 5 {
		var c *websocket.Conn
		if c, _, err = websocket.Dial(ctx, url, nil); err == nil {
			return c, nil
		}
		st.dialFailures.Add(1)
	}
	return nil, err
}

// drain reads a socket's frames until it closes, discarding them without keeping a copy (the
// benchmark's clients share the in-process stack's heap and garbage collector).
func drain(c *websocket.Conn) {
	for {
		_, r, err := c.Reader(context.Background())
		if err != nil {
			return
		}
		if _, err := io.Copy(io.Discard, r); err != nil {
			return
		}
	}
}

func fill(ctx context.Context, lobby lobbyv1.LobbyServiceClient, n int) error {
	g, ctx := errgroup.WithContext(ctx)
	g.SetLimit(8)
	for i := range n {
		g.Go(func() error {
			// A create that timed out under the machine's load is tried again (a few times).
			var err error
			for range 5 {
				if _, err = lobby.CreateRoom(ctx, &lobbyv1.CreateRoomRequest{
					Name: roomName(i), Video: &lobbyv1.Video{Title: "Routine for the spring show", DurationMs: 215_000},
				}); status.Code(err) != codes.Unavailable {
					return err
				}
			}
			return err
		})
	}
	return g.Wait()
}

// roomName names the i-th filled room: one in 100 is a salsa class the searches look for.
func roomName(i int) string {
	if i%100 == 42 {
		return fmt.Sprintf("Salsa Tuesday %d", i)
	}
	return fmt.Sprintf("Practice room %d", i)
}
