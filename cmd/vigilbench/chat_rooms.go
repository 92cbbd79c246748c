package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// benchRooms measures a practice room through the gateway: one leader and many viewers, the
// leader sending sync frames at each offered rate. For each rate it reports the frames each
// viewer received per second, delivery latency (the leader's send → received by each viewer:
// through the gateway, the Room service, Redis and back), the server process's CPU time per
// delivery, and viewers closed; before the runs, the server's memory per idle room socket.
func benchRooms(ctx context.Context, h *Harness, fs *flag.FlagSet, args []string) error {
	gw := fs.String("gw", "127.0.0.1:8089", "gateway address")
	stats := fs.String("stats", "127.0.0.1:8090", "server's stats address")
	n := fs.Int("viewers", 1000, "viewer sockets in the room")
	rates := fs.String("rates", "10,100", "leader frames per second, comma-separated; one run each")
	dur := fs.Duration("duration", 10*time.Second, "measured time per rate")
	warm := fs.Duration("warmup", 2*time.Second, "unmeasured time before each run")
	hold := fs.Duration("hold", 0, "keep the idle sockets open this long after the memory reading (for heap and goroutine profiles from the stats address)")
	if err := parseBenchFlags(fs, args); err != nil {
		return err
	}
	if *n < 1 {
		return fmt.Errorf("%w: -viewers must be at least 1", errUsage)
	}
	rateList, err := parseRates(*rates)
	if err != nil {
		return err
	}
	h.Report.Redis = "the chat-server's (not measured here)"
	for k, v := range map[string]any{"gateway": *gw, "viewers": *n, "duration": dur.String(), "warmup": warm.String()} {
		h.Report.Settings[k] = v
	}
	memURL := "http://" + *stats + "/mem"

	res, err := http.Post("http://"+*gw+"/lobby/rooms", "application/json",
		strings.NewReader(`{"name": "bench", "video": {"title": "bench.mp4", "durationMs": 86400000}}`))
	if err != nil {
		return fmt.Errorf("create a room (is vigilbench chat-server running?): %w", err)
	}
	var created struct {
		Code        string `json:"code"`
		LeaderToken string `json:"leaderToken"`
	}
	err = json.NewDecoder(res.Body).Decode(&created)
	res.Body.Close()
	if err != nil || created.Code == "" {
		return fmt.Errorf("create a room: HTTP %d, %v", res.StatusCode, err)
	}
	leader, err := dialRaw(*gw, "/rooms/"+created.Code+"/websocket?role=leader&clientId=bench-leader&token="+created.LeaderToken)
	if err == nil {
		_, _, err = leader.readFrame() // the state
	}
	if err != nil {
		return fmt.Errorf("leader: %w", err)
	}
	go leader.drain()

	before, err := readMem(memURL)
	if err != nil {
		return err
	}
	// Each viewer reads from its first frame on, as a page does: every join sends the room's
	// people and occupancy to every socket, and a viewer that did not read would be measured
	// with that backlog (and closed as a slow consumer), not idle.
	sent := &sendTimes{}
	viewers := make([]*client, *n)
	for i := range viewers {
		c, err := dialRaw(*gw, fmt.Sprintf("/rooms/%s/websocket?role=viewer&clientId=v%d", created.Code, i))
		if err == nil {
			_, _, err = c.readFrame() // the state
		}
		if err != nil {
			return fmt.Errorf("viewer %d: %w", i, err)
		}
		viewers[i] = c
		go c.readSyncs(sent)
	}
	after, err := readQuiet(memURL)
	if err != nil {
		return err
	}
	addIdleMemory(h.Report, "room socket", *n, before, after)
	holdIdle(ctx, *hold)
	t := h.Report.table("rates", fmt.Sprintf("practice room %s, a leader and %d viewers, per leader rate", created.Code, *n),
		benchColumn{"leader frames/s", "frames/s"}, benchColumn{"deliveries/s", "deliveries/s"}, benchColumn{"p50", "ms"},
		benchColumn{"p99", "ms"}, benchColumn{"max", "ms"}, benchColumn{"server CPU per delivery (ns)", "ns"},
		benchColumn{"viewers closed", "sockets"})
	for _, rate := range rateList {
		if ctx.Err() != nil {
			break
		}
		benchStage("rooms: leader at %d frames/s", rate)
		runLeader(t, leader, viewers, sent, rate, *warm, *dur, memURL)
	}
	for _, c := range append(viewers, leader) {
		_ = c.conn.Close()
	}
	return nil
}

// sendTimes remembers when the leader sent each sync; a sync's positionMs is its number.
type sendTimes struct {
	mu sync.Mutex
	at []time.Time
}

func (s *sendTimes) add(now time.Time) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.at = append(s.at, now)
	return len(s.at) - 1
}

func (s *sendTimes) get(i int) (time.Time, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if i < 0 || i >= len(s.at) {
		return time.Time{}, false
	}
	return s.at[i], true
}

// runLeader has the leader send rate syncs a second and reports what the viewers received in
// dur after warm.
func runLeader(t *benchTable, leader *client, viewers []*client, sent *sendTimes, rate int, warm, dur time.Duration, memURL string) {
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		atRate(context.Background(), rate, stop, func(int) {
			i := sent.add(time.Now())
			_ = leader.write(opText, []byte(`{"type":"sync","playing":true,"positionMs":`+strconv.Itoa(i)+`}`))
		})
	}()
	got, perDelivery, elapsed := measure(viewers, warm, dur, memURL)
	close(stop)
	<-done
	q, closed := got.summary(viewers)
	t.row(strconv.Itoa(rate)+" frames/s", float64(rate), float64(got.n)/elapsed.Seconds(), ms(q(0.50)), ms(q(0.99)), ms(q(1)),
		float64(perDelivery), float64(closed))
	time.Sleep(2 * time.Second) // let the room drain before the next rate
}

var positionMark = []byte(`"positionMs":`)

// readSyncs reads a viewer's frames and records each sync's delivery latency.
func (c *client) readSyncs(sent *sendTimes) {
	c.eachFrame(func(data []byte) {
		if !c.record.Load() || !bytes.HasPrefix(data, []byte(`{"type":"sync"`)) {
			return
		}
		now := time.Now()
		i := bytes.Index(data, positionMark)
		if i < 0 {
			return
		}
		rest := data[i+len(positionMark):]
		j := bytes.IndexAny(rest, ",}")
		if j < 0 {
			return
		}
		n, err := strconv.Atoi(string(rest[:j]))
		if err != nil {
			return
		}
		if at, ok := sent.get(n); ok {
			c.delivered.Add(1)
			c.mu.Lock()
			c.lat = append(c.lat, now.Sub(at))
			c.mu.Unlock()
		}
	})
}

// drain reads and drops a socket's frames (answering pings), so the server never sees it as
// a slow consumer.
func (c *client) drain() { c.eachFrame(func([]byte) {}) }
