package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/vigil-dev/vigil/gateway"
	"github.com/vigil-dev/vigil/pkg/alarm"
	"github.com/vigil-dev/vigil/pkg/alarmadmin"
	lobbyv1 "github.com/vigil-dev/vigil/pkg/api/vigil/lobby/v1"
	"github.com/vigil-dev/vigil/pkg/redistest"
	"github.com/vigil-dev/vigil/pkg/redisx"
	"github.com/vigil-dev/vigil/pkg/server/servertest"
	"github.com/vigil-dev/vigil/pkg/wait"
	lobby "github.com/vigil-dev/vigil/services/lobby/service"
	locks "github.com/vigil-dev/vigil/services/locks/service"
	reservations "github.com/vigil-dev/vigil/services/reservations/service"
)

func TestMain(m *testing.M) { redistest.Main(m) }

// startStack starts reservations, locks and lobby on one Redis under this test's prefix, and
// a "room" admin backend whose queue has no scheduler (so its alarms stay overdue).
func startStack(t *testing.T) (flags []string, prefix, url string, roomQueue *alarm.Queue) {
	t.Helper()
	rdb, prefix := redistest.Client(t)
	url = redistest.URL(t)
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	res := servertest.Start(t, "reservations", servertest.Serve(reservations.New, reservations.Options{Core: servertest.Core(t, prefix, quiet)})).Addr
	lk := servertest.Start(t, "locks", servertest.Serve(locks.New, locks.Options{Core: servertest.Core(t, prefix, quiet)})).Addr
	lb := servertest.Start(t, "lobby", servertest.Serve(lobby.New, lobby.Options{Core: servertest.Core(t, prefix, quiet)})).Addr
	q, err := alarm.New(rdb, alarm.Options{Prefix: prefix, Namespace: "room", Shards: 4})
	if err != nil {
		t.Fatal(err)
	}
	room := servertest.ServeGRPC(t, func(s *grpc.Server) { alarmadmin.Register(s, q, nil, quiet) })
	flags = []string{"--reservations-addr", res, "--locks-addr", lk, "--lobby-addr", lb, "--room-addr", room}
	return flags, prefix, url, q
}

// vigil runs one operator command as main does and returns its output and exit status.
func vigil(t *testing.T, flags []string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	var out, errOut bytes.Buffer
	// The stack's addresses go first, so an address given by the test overrides them.
	cmdArgs := append(append([]string{args[1]}, flags...), args[2:]...)
	err := runOps(context.Background(), args[0], cmdArgs, &out, &errOut)
	switch c, ok := opsExitCode(err); {
	case ok:
		code = c
	case err == nil, errors.Is(err, flag.ErrHelp):
		code = 0
	case errors.Is(err, errUsage):
		code = 2
	default:
		code = 1
	}
	if err != nil {
		errOut.WriteString("vigil: " + err.Error() + "\n")
	}
	return out.String(), errOut.String(), code
}

func wantExit(t *testing.T, code, want int, args []string, stdout, stderr string) {
	t.Helper()
	if code != want {
		t.Fatalf("vigil %s exited %d, want %d\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), code, want, stdout, stderr)
	}
}

// must is vigil with the exit status checked.
func must(t *testing.T, flags []string, want int, args ...string) (stdout, stderr string) {
	t.Helper()
	stdout, stderr, code := vigil(t, flags, args...)
	wantExit(t, code, want, args, stdout, stderr)
	return stdout, stderr
}

func decode(t *testing.T, s string) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(s), &m); err != nil {
		t.Fatalf("output is not one JSON document: %v\n%s", err, s)
	}
	return m
}

// deadLetter writes a dead letter exactly as the queue's retry script does.
func deadLetter(t *testing.T, url, prefix, ns, id, why string) {
	t.Helper()
	rdb, err := redisx.Open(context.Background(), redisx.Config{URL: url})
	if err != nil {
		t.Fatal(err)
	}
	defer rdb.Close()
	q, err := alarm.New(rdb, alarm.Options{Prefix: prefix, Namespace: ns})
	if err != nil {
		t.Fatal(err)
	}
	if err := q.Bury(context.Background(), id, 7, why); err != nil {
		t.Fatal(err)
	}
}

func TestReservationsCommands(t *testing.T) {
	t.Parallel()
	flags, _, _, _ := startStack(t)

	out, _ := must(t, flags, 0, "reservations", "create", "seat-1", "--ttl", "60s")
	if !strings.Contains(out, "held") || !strings.Contains(out, "expiresAt") {
		t.Fatalf("reservations create printed:\n%s\nwant a table with status held", out)
	}
	out, _ = must(t, flags, 0, "reservations", "get", "seat-1", "--json")
	doc := decode(t, out)
	r := doc["reservation"].(map[string]any)
	a := doc["alarm"].(map[string]any)
	if r["status"] != "held" || a["dueAt"] != r["expiresAt"] || doc["deadLetter"] != nil {
		t.Fatalf("reservations get --json = %s; want held, its alarm due at expiresAt, no dead letter", out)
	}
	must(t, flags, exitNotFound, "reservations", "get", "never-made")
	must(t, flags, 2, "reservations", "create", "Bad_Id")
	must(t, flags, 2, "reservations", "create", "seat-2", "--ttl", "1.5s")
	must(t, flags, 2, "reservations", "frobnicate")

	out, _ = must(t, flags, 0, "alarms", "get", "--domain", "reservations", "seat-1")
	if !strings.Contains(out, "status") || !strings.Contains(out, "held") || !strings.Contains(out, "alarm") {
		t.Fatalf("alarms get printed:\n%s\nwant the reservation's fields and its alarm", out)
	}
	must(t, flags, exitNotFound, "alarms", "get", "--domain", "reservations", "nothing-here")
}

func TestAlarmsCommands(t *testing.T) {
	t.Parallel()
	flags, prefix, url, roomQ := startStack(t)

	// A healthy system: something scheduled, nothing late, nothing dead; --check passes.
	must(t, flags, 0, "reservations", "create", "seat-9", "--ttl", "600s")
	out, _ := must(t, flags, 0, "alarms", "list", "--domain", "reservations", "--check")
	if !strings.Contains(out, "reservations  1 ") || !strings.Contains(out, "OLDEST-OVERDUE") {
		t.Fatalf("alarms list printed:\n%s\nwant reservations with 1 pending", out)
	}
	out, _ = must(t, flags, 0, "alarms", "list", "--domain", "reservations", "--shards", "--next", "2")
	if !strings.Contains(out, "seat-9@") {
		t.Fatalf("alarms list --shards printed:\n%s\nwant seat-9 among the next alarms", out)
	}

	// Late: the room queue has no scheduler, so its alarm stays overdue.
	if err := roomQ.Set(context.Background(), "room-abc", time.Now().Add(-5*time.Second)); err != nil {
		t.Fatal(err)
	}
	out, stderr, code := vigil(t, flags, "alarms", "list", "--check", "--late", "1s", "--json")
	wantExit(t, code, exitRefused, []string{"alarms list --check"}, out, stderr)
	doc := decode(t, out)
	if p := fmt.Sprint(doc["problems"]); !strings.Contains(p, `room: alarm "room-abc" is`) || !strings.Contains(stderr, "late") {
		t.Fatalf("alarms list --check --json problems = %s, stderr %q; want room-abc reported late", p, stderr)
	}
	must(t, flags, 0, "alarms", "list", "--domain", "room", "--check", "--late", "1h")

	// Dead letters: listed with their error, replayed or refused per id, then all at once with
	// progress.
	deadLetter(t, url, prefix, "reservations", "stuck-1", "payment gateway timed out")
	out, _ = must(t, flags, 0, "alarms", "dead")
	if !strings.Contains(out, "stuck-1") || !strings.Contains(out, "payment gateway timed out") || !strings.Contains(out, "7") {
		t.Fatalf("alarms dead printed:\n%s\nwant stuck-1 with 7 attempts and its error", out)
	}
	_, stderr, code = vigil(t, flags, "alarms", "list", "--domain", "reservations", "--check")
	wantExit(t, code, exitRefused, []string{"alarms list --check (dead)"}, "", stderr)
	if !strings.Contains(stderr, "1 dead-lettered") {
		t.Fatalf("alarms list --check stderr = %q; want the dead letter named", stderr)
	}
	out, _ = must(t, flags, exitNotFound, "alarms", "replay", "--domain", "reservations", "stuck-1", "not-dead")
	if !strings.Contains(out, "replayed") || !strings.Contains(out, "not a dead letter") {
		t.Fatalf("alarms replay printed:\n%s\nwant stuck-1 replayed and not-dead refused", out)
	}
	waitDead(t, flags, "reservations", 0) // the replayed alarm fired and was acknowledged

	for i := range 30 {
		deadLetter(t, url, prefix, "reservations", fmt.Sprintf("bulk-%02d", i), "boom")
	}
	out, stderr = must(t, flags, 0, "alarms", "discard", "--domain", "reservations", "--all", "--json")
	if n := len(decode(t, out)["discarded"].([]any)); n != 30 || !strings.Contains(stderr, "discarded 30/30") {
		t.Fatalf("alarms discard --all = %d discarded, stderr %q; want 30 with progress to 30/30", n, stderr)
	}
	waitDead(t, flags, "reservations", 0)

	must(t, flags, 2, "alarms", "replay", "stuck-1")                                        // no domain
	must(t, flags, 2, "alarms", "replay", "--domain", "reservations")                       // no ids
	must(t, flags, 2, "alarms", "list", "--domain", "nowhere")                              // unknown domain
	must(t, flags, 2, "alarms", "list", "--next", "1000", "--domain", "reservations")       // out of range
	must(t, flags, exitNotFound, "alarms", "list", "--domain", "lobby")                     // keeps no alarms
	must(t, flags, exitUnavailable, "alarms", "dead", "--reservations-addr", "127.0.0.1:1") // down
}

// waitDead waits until domain has want dead letters.
func waitDead(t *testing.T, flags []string, domain string, want int) {
	t.Helper()
	wait.For(t, domain+"'s dead letters", func() error {
		out, _ := must(t, flags, 0, "alarms", "dead", "--domain", domain, "--json")
		if n := len(decode(t, out)["deadLetters"].([]any)); n != want {
			return fmt.Errorf("%d dead letters, want %d", n, want)
		}
		return nil
	})
}

func TestLocksAndRoomsCommands(t *testing.T) {
	t.Parallel()
	flags, _, _, _ := startStack(t)

	out, _ := must(t, flags, 0, "locks", "acquire", "printer", "--owner", "alice", "--ttl", "30s")
	if !strings.Contains(out, "true") {
		t.Fatalf("locks acquire printed:\n%s\nwant acquired true", out)
	}
	out, _ = must(t, flags, exitRefused, "locks", "acquire", "printer", "--owner", "bob", "--json")
	if doc := decode(t, out); doc["acquired"] != false || doc["holder"] != "alice" {
		t.Fatalf("locks acquire by bob --json = %s; want not acquired, held by alice", out)
	}
	out, _ = must(t, flags, 0, "locks", "get", "printer", "--json")
	if doc := decode(t, out); doc["held"] != true || doc["owner"] != "alice" || doc["fencingToken"] == nil {
		t.Fatalf("locks get --json = %s; want held by alice with a fencing token", out)
	}
	must(t, flags, exitRefused, "locks", "release", "printer", "--owner", "bob")
	must(t, flags, 0, "locks", "release", "printer", "--owner", "alice")
	out, _ = must(t, flags, 0, "locks", "get", "printer")
	if !strings.Contains(out, "false") {
		t.Fatalf("locks get after release printed:\n%s\nwant held false", out)
	}
	must(t, flags, 2, "locks", "acquire", "printer") // no owner
	must(t, flags, 2, "locks", "get", "not\tok")     // a control character: no lock name

	conn, err := grpc.NewClient(flags[5], grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := lobbyv1.NewLobbyServiceClient(conn).CreateRoom(context.Background(), &lobbyv1.CreateRoomRequest{
		Name: "Tuesday practice", Video: &lobbyv1.Video{Title: "Swan Lake act 2", DurationMs: 60_000},
	}); err != nil {
		t.Fatal(err)
	}
	out, _ = must(t, flags, 0, "rooms", "list")
	if !strings.Contains(out, "Tuesday practice") || !strings.Contains(out, "1 rooms, 0 viewers") {
		t.Fatalf("rooms list printed:\n%s\nwant the room and a total line", out)
	}
	out, _ = must(t, flags, 0, "rooms", "list", "--json")
	if rooms := decode(t, out)["rooms"].([]any); len(rooms) != 1 || rooms[0].(map[string]any)["name"] != "Tuesday practice" {
		t.Fatalf("rooms list --json = %s; want the one room", out)
	}
	must(t, flags, exitUnavailable, "rooms", "list", "--lobby-addr", "127.0.0.1:1")
}

// TestCommandsThroughTheGateway runs the main paths with --gateway against a gateway with API
// keys: an admin key sees and replays dead letters; a key without the admin scope is refused
// with exit 4; the domain commands work through REST as they do over gRPC.
func TestCommandsThroughTheGateway(t *testing.T) {
	t.Parallel()
	flags, prefix, url, _ := startStack(t)
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	opsKey, opsHash := gateway.NewAPIKey()
	ciKey, ciHash := gateway.NewAPIKey()
	keys, err := gateway.ParseAPIKeys("ops " + opsHash + " admin; ci " + ciHash + " reservations:write,locks")
	if err != nil {
		t.Fatal(err)
	}
	g, err := gateway.New(context.Background(), gateway.Options{
		Backends: gateway.Backends{Reservations: flags[1], Locks: flags[3], Lobby: flags[5]},
		Security: gateway.Security{Keys: keys}, Logger: quiet,
	})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(g.Handler())
	t.Cleanup(func() { srv.Close(); g.Close() })
	// Unreachable service addresses: every call must go through the gateway.
	down := []string{"--reservations-addr", "127.0.0.1:1", "--locks-addr", "127.0.0.1:1", "--lobby-addr", "127.0.0.1:1", "--room-addr", "127.0.0.1:1"}
	ops := append([]string{"--gateway", srv.URL, "--api-key", opsKey}, down...)
	ci := append([]string{"--gateway", srv.URL, "--api-key", ciKey}, down...)

	out, _ := must(t, ci, 0, "reservations", "create", "gw-seat", "--ttl", "60s", "--json")
	if r := decode(t, out)["reservation"].(map[string]any); r["status"] != "held" {
		t.Fatalf("reservations create through the gateway = %s, want held", out)
	}
	must(t, ci, exitNotFound, "reservations", "get", "never-made")
	must(t, ci, 2, "reservations", "create", "Bad_Id")
	must(t, ci, 0, "locks", "acquire", "gw-lock", "--owner", "alice")
	out, _ = must(t, ci, exitRefused, "locks", "acquire", "gw-lock", "--owner", "bob", "--json")
	if doc := decode(t, out); doc["holder"] != "alice" {
		t.Fatalf("locks acquire by bob through the gateway = %s, want held by alice", out)
	}
	must(t, ci, 0, "locks", "release", "gw-lock", "--owner", "alice")
	must(t, ops, 0, "rooms", "list")

	deadLetter(t, url, prefix, "reservations", "gw-stuck", "card declined")
	_, stderr := must(t, ci, exitRefused, "alarms", "dead") // no admin scope
	if !strings.Contains(stderr, "admin") {
		t.Fatalf("alarms dead with a non-admin key: stderr %q, want the missing scope named", stderr)
	}
	must(t, []string{"--gateway", srv.URL}, exitRefused, "alarms", "list") // no key at all
	out, _ = must(t, ops, 0, "alarms", "dead", "--domain", "reservations")
	if !strings.Contains(out, "gw-stuck") || !strings.Contains(out, "card declined") {
		t.Fatalf("alarms dead through the gateway printed:\n%s\nwant gw-stuck and its error", out)
	}
	_, stderr, code := vigil(t, ops, "alarms", "list", "--domain", "reservations", "--check")
	wantExit(t, code, exitRefused, []string{"alarms list --check through the gateway"}, "", stderr)
	out, _ = must(t, ops, 0, "alarms", "get", "--domain", "reservations", "gw-seat", "--json")
	if doc := decode(t, out); doc["found"] != true || doc["alarm"] == nil {
		t.Fatalf("alarms get through the gateway = %s, want the reservation and its alarm", out)
	}
	must(t, ops, 0, "alarms", "replay", "--domain", "reservations", "gw-stuck")
	must(t, ops, exitNotFound, "alarms", "discard", "--domain", "reservations", "gw-stuck")
	must(t, ops, 2, "alarms", "list", "--gateway", "ftp://x")
	must(t, []string{"--gateway", "http://127.0.0.1:1"}, exitUnavailable, "alarms", "dead", "--domain", "reservations")
}

// TestMainDispatchesOperatorCommands goes through main's own dispatch: the exit status is the
// one the command's error calls for.
func TestMainDispatchesOperatorCommands(t *testing.T) {
	t.Parallel()
	flags, _, _, _ := startStack(t)
	ctx := context.Background()
	for _, c := range []struct {
		args []string
		want int
	}{
		{[]string{"alarms"}, 2},
		{[]string{"alarms", "list", "--domain", "reservations", "--json"}, 0},
		{[]string{"reservations", "get", "never-made", "--json"}, exitNotFound},
		{[]string{"locks", "release", "nobody-holds", "--owner", "x", "--json"}, exitRefused},
		{[]string{"alarms", "dead", "--domain", "reservations", "--reservations-addr", "127.0.0.1:1"}, exitUnavailable},
		{[]string{"alarms", "list", "-h"}, 0},
	} {
		args := append(append([]string{c.args[0]}, c.args[1:min(2, len(c.args))]...), flags...)
		if len(c.args) > 2 {
			args = append(args, c.args[2:]...)
		}
		if len(c.args) == 1 {
			args = c.args
		}
		if got := run(ctx, args); got != c.want {
			t.Errorf("vigil %s exited %d, want %d", strings.Join(c.args, " "), got, c.want)
		}
	}
}
