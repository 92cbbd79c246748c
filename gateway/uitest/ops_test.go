package uitest

import (
	"context"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/redis/go-redis/v9"

	"github.com/vigil-dev/vigil/gateway"
	"github.com/vigil-dev/vigil/pkg/alarm"
	"github.com/vigil-dev/vigil/pkg/redistest"
	"github.com/vigil-dev/vigil/pkg/server/servertest"
	lobby "github.com/vigil-dev/vigil/services/lobby/service"
	reservations "github.com/vigil-dev/vigil/services/reservations/service"
)

// opsDeadLetter writes a reservation alarm's dead letter exactly as the queue's retry script
// does, so the page has something stuck to show.
func opsDeadLetter(t *testing.T, rdb *redis.Client, prefix, id, why string) {
	t.Helper()
	q, err := alarm.New(rdb, alarm.Options{Prefix: prefix, Namespace: "reservations"})
	if err != nil {
		t.Fatal(err)
	}
	if err := q.Bury(context.Background(), id, 7, why); err != nil {
		t.Fatal(err)
	}
}

// startReservations runs the reservations service on this test's key prefix: its address, and
// the Redis client and the prefix its alarms live under.
func startReservations(t *testing.T) (addr string, rdb *redis.Client, prefix string) {
	t.Helper()
	rdb, prefix = redistest.Client(t)
	o := reservations.Options{Core: servertest.Core(t, prefix, testLogs(t))}
	return servertest.Start(t, "reservations", servertest.Serve(reservations.New, o)).Addr, rdb, prefix
}

// TestOpsPage opens the operator's page on reservations and lobby behind the gateway: it counts
// the holds, draws the lateness chart, lists a dead letter with its error, and replays and
// discards dead letters with its buttons.
func TestOpsPage(t *testing.T) {
	t.Parallel()
	resAddr, rdb, prefix := startReservations(t)
	lobbyAddr := servertest.Start(t, "lobby", servertest.Serve(lobby.New, lobby.Options{Core: servertest.Core(t, prefix+":lobby", testLogs(t))})).Addr
	srv := serveGateway(t, gateway.Options{Backends: gateway.Backends{Reservations: resAddr, Lobby: lobbyAddr}, Logger: testLogs(t)})

	postJSON(t, "POST", srv.URL+"/reservations/ops-seat-1", map[string]any{"ttlSeconds": 600}, nil, 201)
	postJSON(t, "POST", srv.URL+"/reservations/ops-seat-2", map[string]any{"ttlSeconds": 600}, nil, 201)
	opsDeadLetter(t, rdb, prefix, "stuck-seat", "payment gateway timed out")

	browser := newBrowser(t)
	p := newPage(t, browser, "ops")
	p.open(srv.URL + "/ui/ops.html")
	p.waitFor("the holds counted", `document.getElementById('count-holds').textContent === '2'`, 10*time.Second)
	p.waitFor("the dead letter listed with its error",
		`[...document.querySelectorAll('#dead tbody tr')].some(r => r.querySelector('.object').textContent === 'stuck-seat' && r.querySelector('.error-text').textContent === 'payment gateway timed out')`,
		10*time.Second)
	p.waitFor("the status warning about dead alarms", `document.getElementById('status').textContent.startsWith('Attention: reservations')`, 5*time.Second)
	p.waitFor("the reservations row of the alarm table", `document.querySelector('#alarms tr[data-domain=reservations] .dead').textContent === '1'`, 5*time.Second)
	p.waitFor("the lateness chart drawn", `document.querySelector('#lateness polyline[data-domain=reservations]') !== null`, 10*time.Second)
	p.screenshot("ops")
	p.checkPlain("ops-phone")

	// Replay: the alarm goes back to the queue, the service handles it, the row goes.
	p.run(chromedp.Click(chromedp.CSS(`button[data-key="reservations/stuck-seat/replay"]`)))
	p.waitFor("the replay confirmed", `document.getElementById('dead-result').textContent === 'Replayed the alarm of stuck-seat (reservations).'`, 10*time.Second)
	p.waitFor("the dead letter gone", `document.getElementById('dead').hidden && !document.getElementById('no-dead').hidden`, 10*time.Second)
	p.waitFor("nothing late", `document.getElementById('status').textContent.startsWith('Nothing late or dead')`, 10*time.Second)

	// Discard needs a second, confirming press.
	opsDeadLetter(t, rdb, prefix, "stuck-again", "boom")
	sel := `button[data-key="reservations/stuck-again/discard"]`
	p.waitFor("the second dead letter listed", `document.querySelector('`+sel+`') !== null`, 10*time.Second)
	p.run(chromedp.Click(chromedp.CSS(sel)))
	p.waitFor("the discard asking for confirmation", `document.querySelector('`+sel+`').textContent === 'Confirm discard'`, 10*time.Second)
	p.run(chromedp.Click(chromedp.CSS(sel)))
	p.waitFor("the discard confirmed", `document.getElementById('dead-result').textContent === 'Discarded the alarm of stuck-again (reservations).'`, 10*time.Second)
	p.waitFor("the dead letter gone", `document.getElementById('dead').hidden`, 10*time.Second)
	if n, _ := rdb.ZCard(context.Background(), alarmKeys(t, rdb, prefix, "stuck-again").Dead).Result(); n != 0 {
		t.Fatalf("stuck-again's shard still has %d dead letters after the discard", n)
	}
	if _, err := rdb.ZScore(context.Background(), alarmKeys(t, rdb, prefix, "stuck-again").Alarms, "stuck-again").Result(); err != redis.Nil {
		t.Fatalf("stuck-again has an alarm after the discard (err %v); want none", err)
	}
}

func alarmKeys(t *testing.T, rdb *redis.Client, prefix, id string) alarm.ShardKeys {
	t.Helper()
	q, err := alarm.New(rdb, alarm.Options{Prefix: prefix, Namespace: "reservations"})
	if err != nil {
		t.Fatal(err)
	}
	return q.KeysOf(id)
}

// TestOpsPageAsksForAnAdminKey: with API keys on, the page says it needs an admin key and opens
// its key form; with the key given, it loads.
func TestOpsPageAsksForAnAdminKey(t *testing.T) {
	t.Parallel()
	resAddr, _, _ := startReservations(t)
	key, hash := gateway.NewAPIKey()
	keys, err := gateway.ParseAPIKeys("ops " + hash + " admin")
	if err != nil {
		t.Fatal(err)
	}
	srv := serveGateway(t, gateway.Options{Backends: gateway.Backends{Reservations: resAddr}, Security: gateway.Security{Keys: keys}, Logger: testLogs(t)})

	p := newPage(t, newBrowser(t), "ops-key")
	p.open(srv.URL + "/ui/ops.html")
	p.waitFor("the page asking for a key", `document.getElementById('status').textContent.includes('give an admin key') && document.getElementById('key-panel').open`, 10*time.Second)
	p.run(chromedp.SendKeys(chromedp.ID("api-key"), key), chromedp.Click(chromedp.CSS(`#key-form button[type=submit]`)))
	p.waitFor("the page loaded with the key", `document.getElementById('status').textContent.startsWith('Nothing late or dead')`, 10*time.Second)
	p.waitFor("the key not left in the form", `document.getElementById('api-key').value === ''`, 5*time.Second)
}
