package gateway

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	"github.com/vigil-dev/vigil/pkg/alarm"
	"github.com/vigil-dev/vigil/pkg/alarmadmin"
	reservationsv1 "github.com/vigil-dev/vigil/pkg/api/vigil/reservations/v1"
	"github.com/vigil-dev/vigil/pkg/redistest"
	"github.com/vigil-dev/vigil/pkg/server/servertest"
	"github.com/vigil-dev/vigil/pkg/wait"
)

// adminBackend serves AlarmAdminService over a fresh queue whose handler always fails, so its
// alarms end as dead letters. It returns the queue and the backend's address.
func adminBackend(t *testing.T, ns string) (*alarm.Queue, string) {
	t.Helper()
	rdb, prefix := redistest.Client(t)
	q, err := alarm.New(rdb, alarm.Options{Prefix: prefix, Namespace: ns, Shards: 2, MaxRetries: 1, RetryBase: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	addr := servertest.ServeGRPC(t, func(s *grpc.Server) {
		alarmadmin.Register(s, q, func(_ context.Context, id string) (proto.Message, error) {
			if id == "seat-1" {
				return &reservationsv1.Reservation{ReservationId: id, Status: "held"}, nil
			}
			return nil, nil
		}, testLogger(t))
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = q.Run(ctx, alarm.HandlerFunc(func(context.Context, alarm.Firing) error { return errors.New("card declined") }))
	}()
	t.Cleanup(func() { cancel(); <-done })
	return q, addr
}

// bareBackend is a gRPC server without the admin service, like a domain that keeps no alarms.
func bareBackend(t *testing.T) string {
	t.Helper()
	return servertest.ServeGRPC(t, func(*grpc.Server) {})
}

func TestAdminRoutes(t *testing.T) {
	t.Parallel()
	q, addr := adminBackend(t, "reservations")
	gw := startGateway(t, Backends{Reservations: addr, Chat: bareBackend(t)})
	ctx := context.Background()
	if err := q.Set(ctx, "seat-1", time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"seat-2", "seat-3"} {
		if err := q.Set(ctx, id, time.Now()); err != nil {
			t.Fatal(err)
		}
	}
	wait.For(t, "two dead letters", func() error {
		if r := call(t, "GET", gw.URL+"/admin/reservations/dead-letters", ""); len(r.body["deadLetters"].([]any)) != 2 {
			return errors.New("want 2 dead letters, have " + r.raw)
		}
		return nil
	})

	r := call(t, "GET", gw.URL+"/admin/reservations/dead-letters", "")
	d := r.body["deadLetters"].([]any)[0].(map[string]any)
	if r.code != 200 || num(t, d["attempts"]) != 2 || d["error"] != "card declined" || num(t, d["deadAt"]) == 0 {
		t.Fatalf("GET dead-letters = %d %s; want attempts 2 as numbers, the error, deadAt", r.code, r.raw)
	}

	r = call(t, "GET", gw.URL+"/admin/reservations/alarms?next=5", "")
	if r.code != 200 || r.body["namespace"] != "reservations" || num(t, r.body["pending"]) != 1 || num(t, r.body["dead"]) != 2 ||
		r.body["oldestOverdue"] != nil || len(r.body["shards"].([]any)) != 2 {
		t.Fatalf("GET alarms = %d %s; want 1 pending, 2 dead, no oldest overdue (null), 2 shards", r.code, r.raw)
	}
	if r = call(t, "GET", gw.URL+"/admin/reservations/alarms?next=x", ""); r.code != 400 {
		t.Fatalf("GET alarms?next=x = %d %s, want 400", r.code, r.raw)
	}
	if r = call(t, "GET", gw.URL+"/admin/reservations/alarms?next=1000", ""); r.code != 400 || r.body["error"] == nil {
		t.Fatalf("GET alarms?next=1000 = %d %s, want 400 with an error", r.code, r.raw)
	}

	r = call(t, "GET", gw.URL+"/admin/reservations/objects/seat-1", "")
	obj, _ := r.body["object"].(map[string]any)
	if r.code != 200 || r.body["found"] != true || obj["status"] != "held" || r.body["alarm"] == nil || r.body["deadLetter"] != nil {
		t.Fatalf("GET objects/seat-1 = %d %s; want found, held, with its alarm, no dead letter", r.code, r.raw)
	}
	r = call(t, "GET", gw.URL+"/admin/reservations/objects/seat-2", "")
	if r.code != 200 || r.body["found"] != false || r.body["alarm"] != nil || r.body["deadLetter"] == nil {
		t.Fatalf("GET objects/seat-2 = %d %s; want not found, no alarm, its dead letter", r.code, r.raw)
	}

	// Overview: the domain with alarms is listed, the one without (chat) is left out.
	r = call(t, "GET", gw.URL+"/admin/alarms", "")
	doms := r.body["domains"].([]any)
	if r.code != 200 || len(doms) != 1 || doms[0].(map[string]any)["domain"] != "reservations" || num(t, doms[0].(map[string]any)["dead"]) != 2 {
		t.Fatalf("GET /admin/alarms = %d %s; want reservations only, with 2 dead", r.code, r.raw)
	}

	// Replay one dead letter (it fails again and comes back), discard the other.
	r = call(t, "POST", gw.URL+"/admin/reservations/dead-letters/seat-2/replay", "")
	if r.code != 200 {
		t.Fatalf("POST replay = %d %s, want 200 with the alarm", r.code, r.raw)
	}
	if r = call(t, "DELETE", gw.URL+"/admin/reservations/dead-letters/seat-3", ""); r.code != http.StatusNoContent {
		t.Fatalf("DELETE seat-3 = %d %s, want 204", r.code, r.raw)
	}
	if r = call(t, "DELETE", gw.URL+"/admin/reservations/dead-letters/seat-3", ""); r.code != 404 || r.body["error"] == nil {
		t.Fatalf("DELETE seat-3 twice = %d %s, want 404 with an error", r.code, r.raw)
	}
	wait.For(t, "seat-2 dead again after its replay", func() error {
		if d, ok, _ := q.DeadLetter(ctx, "seat-2"); !ok || d.Attempts != 2 {
			return errors.New("seat-2 not dead again after its replay")
		}
		return nil
	})

	for _, c := range []struct {
		method, path string
		code         int
	}{
		{"GET", "/admin/nowhere/alarms", 404},
		{"GET", "/admin/chat/alarms", 404},
		{"GET", "/admin/locks/alarms", 404}, // not configured
		{"POST", "/admin/reservations/alarms", 405},
		{"GET", "/admin/reservations/dead-letters/seat-2/replay", 405},
		{"PUT", "/admin/reservations/dead-letters/seat-2", 405},
		{"POST", "/admin/reservations/dead-letters/nobody/replay", 404},
	} {
		if r := call(t, c.method, gw.URL+c.path, ""); r.code != c.code || r.body["error"] == nil {
			t.Errorf("%s %s = %d %s, want %d with an error sentence", c.method, c.path, r.code, r.raw, c.code)
		}
	}
}
