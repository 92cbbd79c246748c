package gateway

import (
	"context"
	"encoding/base64"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/vigil-dev/vigil/pkg/redistest"
	"github.com/vigil-dev/vigil/pkg/redisx"
	"github.com/vigil-dev/vigil/pkg/server"
	"github.com/vigil-dev/vigil/pkg/server/servertest"
	lobbyservice "github.com/vigil-dev/vigil/services/lobby/service"
	reservationservice "github.com/vigil-dev/vigil/services/reservations/service"
	roomservice "github.com/vigil-dev/vigil/services/room/service"
)

// TestNoSecretInLogsMetricsOrStorage runs the reservations, lobby and room services and an
// authenticating gateway on a password-protected Redis, all logging at debug level into one
// buffer, and uses every kind of secret: API keys (right and wrong), a socket token, its
// signing secret, a room's leader token (right and wrong) and the Redis password. None may
// appear in the logs, in /metrics, or (keys and leader tokens) in Redis.
func TestNoSecretInLogsMetricsOrStorage(t *testing.T) {
	t.Parallel()
	const redisPassword = "redis-pass-9f3b2c1d7e"
	rs := redistest.Start(t, "--requirepass", redisPassword)
	rcfg := redisx.Config{URL: rs.URL(t), Password: redisPassword}
	prefix := redistest.Prefix(t)
	logs := &servertest.LogBuffer{}
	log := slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))

	res := servertest.Start(t, "reservations", servertest.Serve(reservationservice.New, reservationservice.Options{Core: server.Core{Redis: rcfg, Prefix: prefix + "-r", Logger: log}, Replay: true}))
	lobby := servertest.Start(t, "lobby", servertest.Serve(lobbyservice.New, lobbyservice.Options{Core: server.Core{Redis: rcfg, Prefix: prefix + "-l", Logger: log}}))
	room := servertest.Start(t, "room", servertest.Serve(roomservice.New, roomservice.Options{Core: server.Core{Redis: rcfg, Prefix: prefix + "-m", Logger: log}, Shards: 2, LobbyAddr: lobby.Addr,
		SessionLease: 3 * time.Second}))
	keys, k := testKeys(t, map[string]string{"app": "reservations,lobby", "ops": "admin", "reader": "reservations:read"})
	signing := []byte("socket-token-signing-secret-0123456789abcdef")
	g, err := New(context.Background(), Options{Backends: Backends{Reservations: res.Addr, Lobby: lobby.Addr, Room: room.Addr},
		Logger: log, Security: Security{Keys: keys, SocketTokenSecret: signing}})
	if err != nil {
		t.Fatal(err)
	}
	gw := httptest.NewServer(g.Handler())
	t.Cleanup(func() { gw.Close(); g.Close() })

	wrongKey := "vk_wrong-key-4c1e9a7d2b"
	wrongLeader := "wrong-leader-token-8d2f"
	expect := func(what string, got apiResponse, want int) {
		t.Helper()
		if got.code != want {
			t.Fatalf("%s = %d %s, want %d", what, got.code, got.raw, want)
		}
	}
	app := []string{"X-API-Key", k["app"]}
	expect("create", call(t, "POST", gw.URL+"/reservations/secret-run", `{"ttlSeconds": 60}`, app...), 201)
	expect("wrong key", call(t, "POST", gw.URL+"/reservations/secret-run", `{"ttlSeconds": 60}`, "Authorization", "Bearer "+wrongKey), 401)
	expect("out of scope", call(t, "POST", gw.URL+"/reservations/secret-run", `{"ttlSeconds": 60}`, "Authorization", "Bearer "+k["reader"]), 403)
	expect("replay", call(t, "POST", gw.URL+"/reservations/secret-run/replay-alarm", `{"now": 1}`, "Authorization", "Bearer "+k["ops"]), 200)
	expect("bad input", call(t, "POST", gw.URL+"/reservations/secret-run", `{"ttlSeconds": "x"}`, app...), 400)

	created := call(t, "POST", gw.URL+"/lobby/rooms", `{"name": "Secret", "video": {"title": "T", "durationMs": 60000}}`, app...)
	expect("create room", created, 201)
	code, _ := created.body["code"].(string)
	leader, _ := created.body["leaderToken"].(string)
	if code == "" || leader == "" {
		t.Fatalf("POST /lobby/rooms = %s, want a code and a leader token", created.raw)
	}
	tokRes := call(t, "POST", gw.URL+"/auth/socket-token", "", app...)
	expect("socket token", tokRes, 200)
	sockTok, _ := tokRes.body["token"].(string)

	if _, code, err := dialWS(t, gw.URL+"/rooms/"+code+"/websocket?role=leader&clientId=lead&token="+wrongLeader+"&access_token="+sockTok); err == nil || code != http.StatusUnauthorized {
		t.Fatalf("leader socket with a wrong leader token = %d %v, want 401", code, err)
	}
	c, status, err := dialWS(t, gw.URL+"/rooms/"+code+"/websocket?role=leader&clientId=lead&token="+leader+"&access_token="+sockTok)
	if err != nil {
		t.Fatalf("leader socket = %d %v, want open", status, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, _, err := c.Read(ctx); err != nil {
		t.Fatalf("leader's state frame: %v", err)
	}
	expect("end with a wrong leader token", call(t, "DELETE", gw.URL+"/lobby/rooms/"+code, "", "X-API-Key", k["app"], "Authorization", "Bearer "+wrongLeader), 401)
	expect("end room", call(t, "DELETE", gw.URL+"/lobby/rooms/"+code, "", "X-API-Key", k["app"], "Authorization", "Bearer "+leader), 204)

	metrics := call(t, "GET", gw.URL+"/metrics", "")
	secrets := map[string]string{
		"app key": k["app"], "ops key": k["ops"], "reader key": k["reader"], "wrong key": wrongKey,
		"socket token": sockTok, "socket token signature": sockTok[strings.LastIndex(sockTok, ".")+1:],
		"signing secret": string(signing), "signing secret (base64)": base64.StdEncoding.EncodeToString(signing),
		"leader token": leader, "wrong leader token": wrongLeader, "Redis password": redisPassword,
	}
	all := logs.String()
	if !strings.Contains(all, `"event":"refused"`) || !strings.Contains(all, `"key":"reader"`) {
		t.Fatalf("the run's logs have no refusal naming the key reader; is logging wired? %.2000s", all)
	}
	for what, s := range secrets {
		if strings.Contains(all, s) {
			t.Errorf("the logs contain the %s: %s", what, lineWith(all, s))
		}
		if strings.Contains(metrics.raw, s) {
			t.Errorf("/metrics contains the %s", what)
		}
	}

	// Storage: neither API keys nor leader tokens are kept in the clear.
	rdb := redis.NewClient(&redis.Options{Addr: strings.TrimSuffix(strings.TrimPrefix(rs.URL(t), "redis://"), "/0"), Password: redisPassword})
	defer rdb.Close()
	dump := dumpKeys(t, rdb)
	if !strings.Contains(dump, code) {
		t.Fatalf("the Redis dump does not mention room %s; is the dump reading the right keys? %.500s", code, dump)
	}
	for _, what := range []string{"leader token", "app key"} {
		if strings.Contains(dump, secrets[what]) {
			t.Errorf("Redis holds the %s in the clear", what)
		}
	}
}

// lineWith returns the log line that contains s, for the failure message (s masked).
func lineWith(all, s string) string {
	for _, l := range strings.Split(all, "\n") {
		if strings.Contains(l, s) {
			return strings.ReplaceAll(l, s, "<SECRET>")
		}
	}
	return ""
}

// dumpKeys renders every key and value of the Redis as text.
func dumpKeys(t *testing.T, rdb *redis.Client) string {
	t.Helper()
	ctx := context.Background()
	var b strings.Builder
	iter := rdb.Scan(ctx, 0, "*", 1000).Iterator()
	for iter.Next(ctx) {
		key := iter.Val()
		typ, err := rdb.Type(ctx, key).Result()
		if err != nil {
			t.Fatal(err)
		}
		var v any
		switch typ {
		case "string":
			v, err = rdb.Get(ctx, key).Result()
		case "hash":
			v, err = rdb.HGetAll(ctx, key).Result()
		case "zset":
			v, err = rdb.ZRangeWithScores(ctx, key, 0, -1).Result()
		case "set":
			v, err = rdb.SMembers(ctx, key).Result()
		case "list":
			v, err = rdb.LRange(ctx, key, 0, -1).Result()
		case "stream":
			v, err = rdb.XRange(ctx, key, "-", "+").Result()
		}
		if err != nil {
			t.Fatalf("read %s: %v", key, err)
		}
		fmt.Fprintf(&b, "%s %s %v\n", key, typ, v)
	}
	if err := iter.Err(); err != nil {
		t.Fatal(err)
	}
	return b.String()
}
