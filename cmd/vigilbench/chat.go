package main

// The chat benchmarks measure the gateway's socket routes: deliveries per second and delivery
// latency in one room with many sockets, and the server's memory per idle socket, for a chat
// room (chat) and for a practice room with one leader (rooms). They run in two processes, so
// the memory figures are the server's (the gateway plus the services, which hold nothing per
// socket beyond a practice room's session) and nothing else:
//
//	vigilbench chat-server [--redis-url URL]              # chat, lobby, room + gateway, until interrupted
//	vigilbench chat -sockets 1000 -rates 200,500,1000     # chat clients, in another process
//	vigilbench rooms -viewers 1000 -rates 10,100          # a leader and viewers, in another process

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/vigil-dev/vigil/gateway"
	"github.com/vigil-dev/vigil/pkg/redisx"
	"github.com/vigil-dev/vigil/pkg/server"
	chatservice "github.com/vigil-dev/vigil/services/chat/service"
	lobbyservice "github.com/vigil-dev/vigil/services/lobby/service"
	roomservice "github.com/vigil-dev/vigil/services/room/service"
)

// benchChatServer runs one chat replica, the Lobby, one Room replica and the gateway on fixed
// addresses, plus /mem on the stats address, until interrupted; chat and rooms measure it from
// another process. A socket may send 10,000 frames a second (a leader at 100/s and more).
func benchChatServer(ctx context.Context, h *Harness, fs *flag.FlagSet, args []string) error {
	redisURL := fs.String("redis", "", "Redis URL (the same as --redis-url); empty: a throwaway redis-server")
	addr := fs.String("addr", "127.0.0.1:8089", "gateway address")
	chatAddr := fs.String("chat", "127.0.0.1:7089", "chat gRPC address")
	lobbyAddr := fs.String("lobby", "127.0.0.1:7091", "lobby gRPC address")
	roomAddr := fs.String("room", "127.0.0.1:7092", "room gRPC address")
	stats := fs.String("stats", "127.0.0.1:8090", "address of the /mem endpoint")
	parts := fs.String("run", "all", `what this process runs: "all", "gateway" (the services run in another `+
		`vigilbench chat-server -run services), or "services"; two processes measure the gateway alone`)
	if err := parseBenchFlags(fs, args); err != nil {
		return err
	}
	switch *parts {
	case "all", "gateway", "services":
	default:
		return fmt.Errorf("%w: -run %q: want all, gateway or services", errUsage, *parts)
	}
	if *redisURL != "" {
		h.flags.redisURL = *redisURL
	}
	h.Report.Settings["run"] = *parts
	h.Report.Settings["gateway"] = *addr
	h.Report.Settings["stats"] = *stats
	errc := make(chan error, 2)
	h.Report.Redis = "none in this process (-run gateway)"
	if *parts != "gateway" {
		r, err := h.Redis(ctx)
		if err != nil {
			return err
		}
		rc := redisx.Config{URL: r.url}
		chat, err := chatservice.New(ctx, chatservice.Options{Core: server.Core{GRPCAddr: *chatAddr, Redis: rc, Prefix: h.Prefix, Logger: quiet("chat")}})
		if err != nil {
			return fmt.Errorf("chat: %w", err)
		}
		h.Serve(ctx, "chat", chat)
		lobby, err := lobbyservice.New(ctx, lobbyservice.Options{Core: server.Core{GRPCAddr: *lobbyAddr, Redis: rc, Prefix: h.Prefix + "-lobby", Logger: quiet("lobby")}})
		if err != nil {
			return fmt.Errorf("lobby: %w", err)
		}
		h.Serve(ctx, "lobby", lobby)
		room, err := roomservice.New(ctx, roomservice.Options{Core: server.Core{GRPCAddr: *roomAddr, Redis: rc, Prefix: h.Prefix + "-room", Logger: quiet("room")}, LobbyAddr: *lobbyAddr})
		if err != nil {
			return fmt.Errorf("room: %w", err)
		}
		h.Serve(ctx, "room", room)
	}
	if *parts != "services" {
		// The gateway listens on a fixed address the clients know, with the socket limits raised
		// (h.Gateway is an ephemeral port with the default limits).
		go func() {
			errc <- gateway.Run(ctx, gateway.Options{
				Addr: *addr, Backends: gateway.Backends{Chat: *chatAddr, Lobby: *lobbyAddr, Room: *roomAddr}, Logger: quiet("gateway"),
				Sockets: gateway.SocketLimits{Rate: 10_000, Burst: 10_000},
			}, nil)
		}()
	}
	go func() {
		mux := http.NewServeMux()
		mux.HandleFunc("GET /mem", func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Query().Get("gc") != "0" {
				runtime.GC()
				debug.FreeOSMemory()
			}
			var ms runtime.MemStats
			runtime.ReadMemStats(&ms)
			var ru syscall.Rusage
			_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
			// What a new goroutine's stack starts at: Go sets it at each GC from the average stack
			// in use, so a burst of deep goroutines makes the next sockets' readers start larger.
			start := []metrics.Sample{{Name: "/gc/stack/starting-size:bytes"}}
			metrics.Read(start)
			_ = json.NewEncoder(w).Encode(map[string]uint64{
				"heapInuse": ms.HeapInuse, "stackInuse": ms.StackInuse, "goroutines": uint64(runtime.NumGoroutine()),
				"rss": rss(), "cpuNanos": uint64(ru.Utime.Nano() + ru.Stime.Nano()), "heapLive": ms.HeapAlloc,
				"stackStart": start[0].Value.Uint64(),
			})
		})
		mux.HandleFunc("GET /debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("GET /debug/pprof/trace", pprof.Trace)
		mux.Handle("GET /debug/pprof/heap", pprof.Handler("heap"))
		mux.Handle("GET /debug/pprof/goroutine", pprof.Handler("goroutine"))
		srv := &http.Server{Addr: *stats, Handler: mux, ReadHeaderTimeout: 10 * time.Second}
		go func() {
			<-ctx.Done()
			_ = srv.Close()
		}()
		if err := srv.ListenAndServe(); err != nil && ctx.Err() == nil {
			errc <- fmt.Errorf("stats: %w", err)
		}
	}()
	benchStage("chat-server (%s): gateway %s, chat %s, lobby %s, room %s, stats %s; interrupt to stop", *parts, *addr, *chatAddr, *lobbyAddr, *roomAddr, *stats)
	select {
	case err := <-errc:
		if ctx.Err() == nil {
			return err
		}
	case <-ctx.Done():
	}
	h.Report.note("chat-server ran until interrupted; the figures are chat's and rooms' (the client processes)")
	return nil
}

// rss is the process's resident set in bytes, from /proc.
func rss() uint64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, "VmRSS:") {
			f := strings.Fields(line)
			kb, _ := strconv.ParseUint(f[1], 10, 64)
			return kb << 10
		}
	}
	return 0
}

type memStats struct {
	HeapInuse, StackInuse, Goroutines, RSS, CPUNanos uint64
	// HeapLive is the heap's live bytes after the GC (HeapInuse also counts the free slots of
	// spans in use); StackStart is the size new goroutines' stacks start at.
	HeapLive, StackStart uint64
}

func readMem(url string) (memStats, error) {
	if pid, ok := strings.CutPrefix(url, "proc:"); ok {
		return readProc(strings.TrimSuffix(pid, "?gc=0"))
	}
	res, err := http.Get(url)
	if err != nil {
		return memStats{}, err
	}
	defer res.Body.Close()
	var m map[string]uint64
	if err := json.NewDecoder(res.Body).Decode(&m); err != nil {
		return memStats{}, err
	}
	return memStats{HeapInuse: m["heapInuse"], StackInuse: m["stackInuse"], Goroutines: m["goroutines"], RSS: m["rss"], CPUNanos: m["cpuNanos"],
		HeapLive: m["heapLive"], StackStart: m["stackStart"]}, nil
}

// client is one benchmark socket: a minimal WebSocket client, so the measuring process spends
// little per frame (it reads whole bursts through one 64 KiB buffer).
type client struct {
	conn      net.Conn
	br        *bufio.Reader
	wmu       sync.Mutex
	buf       []byte
	delivered atomic.Int64
	mu        sync.Mutex
	lat       []time.Duration
	fromStore []time.Duration
	record    atomic.Bool
	closed    atomic.Bool
	nextID    atomic.Int64
}

// benchChat measures a chat room through a running chat-server: the server's memory per idle
// socket, then for each offered rate the deliveries per second, delivery latency (send →
// received by every socket), the server's CPU time per delivery and sockets closed.
func benchChat(ctx context.Context, h *Harness, fs *flag.FlagSet, args []string) error {
	gw := fs.String("gw", "127.0.0.1:8089", "gateway address")
	stats := fs.String("stats", "127.0.0.1:8090", "server's stats address")
	n := fs.Int("sockets", 1000, "sockets in the room")
	senders := fs.Int("senders", 50, "how many of the sockets send")
	rates := fs.String("rates", "100,200,500,1000", "offered messages per second, comma-separated; one run each")
	dur := fs.Duration("duration", 10*time.Second, "measured time per rate")
	warm := fs.Duration("warmup", 2*time.Second, "unmeasured time before each run")
	room := fs.String("room", "bench", "room name")
	target := fs.String("target", "vigil", `server kind: "vigil" (the gateway), or "centrifugo" (a local Centrifugo v6 with `+
		`client publishing allowed in the channel; -gw its address, -pid its process id)`)
	pid := fs.Int("pid", 0, "for -target centrifugo: the server's process id, for RSS and CPU from /proc")
	pack := fs.Bool("pack", false, "for -target vigil: ask the gateway to pack bursts into one frame (&pack=1)")
	hold := fs.Duration("hold", 0, "keep the idle sockets open this long after the memory reading (for heap and goroutine profiles from the stats address)")
	if err := parseBenchFlags(fs, args); err != nil {
		return err
	}
	if *n < 1 || *senders < 1 {
		return fmt.Errorf("%w: -sockets and -senders must be at least 1", errUsage)
	}
	if *target != "vigil" && *target != "centrifugo" {
		return fmt.Errorf("%w: -target %q: want vigil or centrifugo", errUsage, *target)
	}
	rateList, err := parseRates(*rates)
	if err != nil {
		return err
	}
	h.Report.Redis = "the chat-server's (not measured here)"
	for k, v := range map[string]any{"gateway": *gw, "sockets": *n, "senders": min(*senders, *n), "duration": dur.String(),
		"warmup": warm.String(), "target": *target, "pack": *pack} {
		h.Report.Settings[k] = v
	}
	if *pack {
		packQuery = "&pack=1"
	}
	memURL := "http://" + *stats + "/mem"
	if *target == "centrifugo" {
		memURL = fmt.Sprintf("proc:%d", *pid)
		centrifugo = true
	}

	before, err := readMem(memURL)
	if err != nil {
		return fmt.Errorf("the server's stats (is vigilbench chat-server running?): %w", err)
	}
	benchStage("opening %d sockets", *n)
	clients := make([]*client, *n)
	for i := range clients {
		var c *client
		if centrifugo {
			c, err = dialCentrifugo(*gw, *room)
		} else {
			c, err = dialRaw(*gw, fmt.Sprintf("/websocket?room=%s&userId=b%d%s", *room, i, packQuery))
			if err == nil {
				_, _, err = c.readFrame() // the history frame
			}
		}
		if err != nil {
			return fmt.Errorf("socket %d: %w", i, err)
		}
		clients[i] = c
	}
	after, err := readMem(memURL)
	if err != nil {
		return err
	}
	addIdleMemory(h.Report, "socket", *n, before, after)
	holdIdle(ctx, *hold)

	for _, c := range clients {
		go c.readLoop()
	}
	t := h.Report.table("rates", fmt.Sprintf("chat room, %d sockets, %d senders (%s), per offered rate", *n, min(*senders, *n), *target),
		benchColumn{"offered msg/s", "msg/s"}, benchColumn{"delivered/s", "deliveries/s"}, benchColumn{"p50", "ms"},
		benchColumn{"p99", "ms"}, benchColumn{"max", "ms"}, benchColumn{"p50 from store", "ms"},
		benchColumn{"server CPU per delivery (ns)", "ns"}, benchColumn{"sockets closed", "sockets"})
	for _, rate := range rateList {
		if ctx.Err() != nil {
			break
		}
		benchStage("chat: %d msg/s offered", rate)
		runChatRate(t, clients[:min(*senders, *n)], clients, rate, *warm, *dur, memURL)
	}
	for _, c := range clients {
		_ = c.conn.Close()
	}
	return nil
}

// runChatRate offers rate messages a second, spread over the senders, and reports what the sockets
// received in dur after warm.
func runChatRate(t *benchTable, senders, all []*client, rate int, warm, dur time.Duration, memURL string) {
	// One pacer spreads the offered rate evenly over the senders, round-robin, so sends do not
	// come in bursts.
	stop := make(chan struct{})
	var wg sync.WaitGroup
	queues := make([]chan struct{}, len(senders))
	for i, s := range senders {
		queues[i] = make(chan struct{}, 64)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				case <-queues[i]:
					now := strconv.FormatInt(time.Now().UnixNano(), 10)
					body := `{"body":"t` + now + `"}`
					if centrifugo {
						body = `{"id":` + strconv.FormatInt(s.nextID.Add(1), 10) + `,"publish":{"channel":"` + centrifugoChannel + `","data":{"body":"t` + now + `"}}}`
					}
					_ = s.write(opText, []byte(body))
				}
			}
		}()
	}
	wg.Go(func() {
		atRate(context.Background(), rate, stop, func(i int) {
			select {
			case queues[i%len(queues)] <- struct{}{}:
			default:
			}
		})
	})
	got, perDelivery, elapsed := measure(all, warm, dur, memURL)
	var fromStore []time.Duration
	for _, c := range all {
		c.mu.Lock()
		fromStore = append(fromStore, c.fromStore...)
		c.mu.Unlock()
	}
	slices.Sort(fromStore)
	close(stop)
	wg.Wait()
	q, closed := got.summary(all)
	storeP50 := time.Duration(0)
	if len(fromStore) > 0 {
		storeP50 = fromStore[len(fromStore)/2].Round(time.Millisecond)
	}
	t.row(strconv.Itoa(rate)+" msg/s", float64(rate), float64(got.n)/elapsed.Seconds(), ms(q(0.50)), ms(q(0.99)), ms(q(1)),
		ms(storeP50), float64(perDelivery), float64(closed))
	// Let the room drain before the next rate.
	time.Sleep(2 * time.Second)
}

// measure waits warm (the senders' warm-up), then records what clients receive for dur. It
// returns what they received, the server's CPU per delivery meanwhile, and how long it recorded.
func measure(clients []*client, warm, dur time.Duration, memURL string) (got delivered, perDelivery, elapsed time.Duration) {
	time.Sleep(warm) // a benchmark's warm-up, not a test's wait
	for _, c := range clients {
		c.mu.Lock()
		c.lat = c.lat[:0]
		c.fromStore = c.fromStore[:0]
		c.mu.Unlock()
		c.delivered.Store(0)
		c.record.Store(true)
	}
	cpu0, _ := readMem(memURL + "?gc=0")
	start := time.Now()
	time.Sleep(dur)
	cpu1, _ := readMem(memURL + "?gc=0")
	got = gather(clients)
	elapsed = time.Since(start)
	if got.n > 0 {
		perDelivery = time.Duration((cpu1.CPUNanos - cpu0.CPUNanos) / uint64(got.n))
	}
	return got, perDelivery, elapsed
}

// delivered is what the sockets of a room received while recording, during one measured rate.
type delivered struct {
	n   int64
	lat []time.Duration // each delivery's latency, sorted
}

// gather stops the sockets recording and collects what they received.
func gather(clients []*client) delivered {
	var d delivered
	for _, c := range clients {
		c.record.Store(false)
		d.n += c.delivered.Load()
		c.mu.Lock()
		d.lat = append(d.lat, c.lat...)
		c.mu.Unlock()
	}
	slices.Sort(d.lat)
	return d
}

// summary is the latency quantile function of d and how many of clients were closed as slow
// consumers.
func (d delivered) summary(clients []*client) (q func(p float64) time.Duration, closed int) {
	q = func(p float64) time.Duration {
		if len(d.lat) == 0 {
			return 0
		}
		return d.lat[min(len(d.lat)-1, int(p*float64(len(d.lat))))].Round(10 * time.Microsecond)
	}
	for _, c := range clients {
		if c.closed.Load() {
			closed++
		}
	}
	return q, closed
}

// atRate calls f(0), f(1), ... rate times a second until stop closes (nil: never) or ctx ends.
func atRate(ctx context.Context, rate int, stop <-chan struct{}, f func(i int)) {
	t := time.NewTicker(time.Second / time.Duration(rate))
	defer t.Stop()
	for i := 0; ; i++ {
		select {
		case <-stop:
			return
		case <-ctx.Done():
			return
		case <-t.C:
			f(i)
		}
	}
}

var (
	bodyMark = []byte(`"body":"t`)
	tsMark   = []byte(`"ts":`)
)

// eachFrame reads the socket's frames until it closes, answering pings, and hands every other
// frame to f; the socket counts as closed once it returns.
func (c *client) eachFrame(f func(data []byte)) {
	defer c.closed.Store(true)
	for {
		op, data, err := c.readFrame()
		if err != nil {
			return
		}
		if op == opPing {
			_ = c.write(opPong, data)
			continue
		}
		f(data)
	}
}

func (c *client) readLoop() { c.eachFrame(c.recordMessages) }

// recordMessages records the delivery latency of each chat message in a frame.
func (c *client) recordMessages(data []byte) {
	if centrifugo && hasPingLine(data) {
		_ = c.write(opText, []byte("{}")) // Centrifugo's application-level ping
	}
	if !c.record.Load() {
		return
	}
	now := time.Now()
	// A frame may hold several messages (Centrifugo batches them, one JSON per line).
	for rest := data; ; {
		i := bytes.Index(rest, bodyMark)
		if i < 0 {
			break
		}
		rest = rest[i+len(bodyMark):]
		j := bytes.IndexByte(rest, '"')
		if j < 0 {
			break
		}
		sent, err := strconv.ParseInt(string(rest[:j]), 10, 64)
		if err != nil {
			continue
		}
		var fs time.Duration
		if k := bytes.Index(rest, tsMark); k >= 0 && !centrifugo {
			ts := rest[k+len(tsMark):]
			if e := bytes.IndexByte(ts, '}'); e > 0 {
				if v, err := strconv.ParseInt(string(ts[:e]), 10, 64); err == nil {
					fs = now.Sub(time.UnixMilli(v))
				}
			}
		}
		c.delivered.Add(1)
		c.mu.Lock()
		c.lat = append(c.lat, now.Sub(time.Unix(0, sent)))
		c.fromStore = append(c.fromStore, fs)
		c.mu.Unlock()
	}
}

// WebSocket opcodes.
const (
	opText = 0x1
	opPing = 0x9
	opPong = 0xA
)

func dialRaw(addr, path string) (*client, error) {
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(conn, "GET %s HTTP/1.1\r\nHost: %s\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"+
		"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n", path, addr)
	br := bufio.NewReaderSize(conn, 64<<10)
	res, err := http.ReadResponse(br, nil)
	if err != nil {
		conn.Close()
		return nil, err
	}
	if res.StatusCode != http.StatusSwitchingProtocols {
		conn.Close()
		return nil, fmt.Errorf("upgrade answered %s", res.Status)
	}
	return &client{conn: conn, br: br}, nil
}

// readFrame reads one unfragmented server frame (servers do not mask). The payload is valid
// until the next call.
func (c *client) readFrame() (byte, []byte, error) {
	var h [2]byte
	if _, err := io.ReadFull(c.br, h[:]); err != nil {
		return 0, nil, err
	}
	n := uint64(h[1] & 0x7f)
	switch n {
	case 126:
		var b [2]byte
		if _, err := io.ReadFull(c.br, b[:]); err != nil {
			return 0, nil, err
		}
		n = uint64(binary.BigEndian.Uint16(b[:]))
	case 127:
		var b [8]byte
		if _, err := io.ReadFull(c.br, b[:]); err != nil {
			return 0, nil, err
		}
		n = binary.BigEndian.Uint64(b[:])
	}
	if uint64(cap(c.buf)) < n {
		c.buf = make([]byte, n)
	}
	c.buf = c.buf[:n]
	if _, err := io.ReadFull(c.br, c.buf); err != nil {
		return 0, nil, err
	}
	return h[0] & 0x0f, c.buf, nil
}

// write sends one masked frame (mask key 0: the payload goes as is).
func (c *client) write(op byte, p []byte) error {
	f := make([]byte, 0, len(p)+14)
	f = append(f, 0x80|op)
	switch {
	case len(p) < 126:
		f = append(f, 0x80|byte(len(p)))
	case len(p) < 1<<16:
		f = append(f, 0x80|126, byte(len(p)>>8), byte(len(p)))
	default:
		f = append(f, 0x80|127)
		f = binary.BigEndian.AppendUint64(f, uint64(len(p)))
	}
	f = append(f, 0, 0, 0, 0)
	f = append(f, p...)
	c.wmu.Lock()
	defer c.wmu.Unlock()
	_, err := c.conn.Write(f)
	return err
}

// packQuery asks the gateway to pack bursts.
var packQuery string

// centrifugo makes the load speak Centrifugo's client protocol (JSON, protocol v2).
var centrifugo bool

const centrifugoChannel = "bench"

// dialCentrifugo connects to Centrifugo without a token (client.insecure) and subscribes to the
// channel.
func dialCentrifugo(addr, channel string) (*client, error) {
	_ = channel
	c, err := dialRaw(addr, "/connection/websocket")
	if err != nil {
		return nil, err
	}
	if err := c.write(opText, []byte(`{"id":1,"connect":{}}`+"\n"+`{"id":2,"subscribe":{"channel":"`+centrifugoChannel+`"}}`)); err != nil {
		return nil, err
	}
	c.nextID.Store(2)
	for {
		_, data, err := c.readFrame()
		if err != nil {
			return nil, err
		}
		if bytes.Contains(data, []byte(`"error"`)) {
			return nil, fmt.Errorf("centrifugo: %s", data)
		}
		if bytes.Contains(data, []byte(`"id":2`)) {
			return c, nil
		}
	}
}

// readProc reads a process's RSS and CPU time from /proc (no Go heap figures).
func readProc(pid string) (memStats, error) {
	var m memStats
	b, err := os.ReadFile("/proc/" + pid + "/status")
	if err != nil {
		return m, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) >= 2 {
			switch f[0] {
			case "VmRSS:":
				kb, _ := strconv.ParseUint(f[1], 10, 64)
				m.RSS = kb << 10
			case "Threads:":
				m.Goroutines, _ = strconv.ParseUint(f[1], 10, 64)
			}
		}
	}
	st, err := os.ReadFile("/proc/" + pid + "/stat")
	if err != nil {
		return m, err
	}
	// Fields after the command: utime and stime are the 14th and 15th, in clock ticks (100/s).
	f := strings.Fields(string(st[bytes.LastIndexByte(st, ')')+2:]))
	ut, _ := strconv.ParseUint(f[11], 10, 64)
	stm, _ := strconv.ParseUint(f[12], 10, 64)
	m.CPUNanos = (ut + stm) * uint64(10*time.Millisecond)
	return m, nil
}

// hasPingLine reports whether a Centrifugo frame (one JSON per line) holds a ping, "{}".
func hasPingLine(data []byte) bool {
	for _, line := range bytes.Split(data, []byte("\n")) {
		if string(bytes.TrimSpace(line)) == "{}" {
			return true
		}
	}
	return false
}

// parseRates reads a comma-separated list of positive rates.
func parseRates(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		rate, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || rate < 1 {
			return nil, fmt.Errorf("%w: -rates %q: want positive whole numbers, comma-separated", errUsage, s)
		}
		out = append(out, rate)
	}
	return out, nil
}

// ms is a duration in milliseconds, the unit of the report's latency columns.
func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// readQuiet reads the server's memory once what the sockets were sent has been written: when
// its goroutine count (a writer runs per socket with frames queued) stops changing between two
// reads, or after 20 s.
func readQuiet(url string) (memStats, error) {
	m, err := readMem(url)
	for deadline := time.Now().Add(20 * time.Second); err == nil && time.Now().Before(deadline); {
		time.Sleep(200 * time.Millisecond) // a polling pace, not a wait for a condition
		var next memStats
		if next, err = readMem(url); err == nil && next.Goroutines == m.Goroutines {
			return next, nil
		}
		m = next
	}
	return m, err
}

// holdIdle keeps the sockets idle for d after the memory reading, so profiles can be taken
// from the stats address (/debug/pprof/heap, /debug/pprof/goroutine) while nothing moves.
func holdIdle(ctx context.Context, d time.Duration) {
	if d <= 0 {
		return
	}
	benchStage("holding the idle sockets for %s", d)
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// addIdleMemory adds the server's growth per idle socket between before and after (n sockets).
func addIdleMemory(r *benchReport, what string, n int, before, after memStats) {
	per := func(a, b uint64) float64 { return (float64(a) - float64(b)) / float64(n) / 1024 }
	r.add("idle_heap_stack_kib", "server heap+stack per idle "+what, per(after.HeapInuse+after.StackInuse, before.HeapInuse+before.StackInuse), "KiB")
	r.add("idle_heap_kib", "server heap per idle "+what, per(after.HeapInuse, before.HeapInuse), "KiB")
	r.add("idle_stack_kib", "server stack per idle "+what, per(after.StackInuse, before.StackInuse), "KiB")
	if after.HeapLive > 0 {
		r.add("idle_live_heap_kib", "server live heap per idle "+what, per(after.HeapLive, before.HeapLive), "KiB")
		r.add("stack_start_kib", "server's goroutine starting stack after the idle "+what+"s opened", float64(after.StackStart)/1024, "KiB")
	}
	r.add("idle_rss_kib", "server RSS per idle "+what, per(after.RSS, before.RSS), "KiB")
	r.add("idle_goroutines", "server goroutines per idle "+what, (float64(after.Goroutines)-float64(before.Goroutines))/float64(n), "goroutines")
}
