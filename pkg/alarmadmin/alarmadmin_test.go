package alarmadmin

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/vigil-dev/vigil/pkg/alarm"
	adminv1 "github.com/vigil-dev/vigil/pkg/api/vigil/admin/v1"
	reservationsv1 "github.com/vigil-dev/vigil/pkg/api/vigil/reservations/v1"
	"github.com/vigil-dev/vigil/pkg/redistest"
	"github.com/vigil-dev/vigil/pkg/server/servertest"
	"github.com/vigil-dev/vigil/pkg/wait"
)

func TestMain(m *testing.M) { redistest.Main(m) }

// setup serves the admin service of a fresh queue over real gRPC, with a lookup that knows the
// objects in known, and returns the queue and a client.
func setup(t *testing.T, o alarm.Options, known map[string]proto.Message) (*alarm.Queue, adminv1.AlarmAdminServiceClient) {
	t.Helper()
	rdb, prefix := redistest.Client(t)
	o.Prefix = prefix
	if o.Namespace == "" {
		o.Namespace = "tests"
	}
	q, err := alarm.New(rdb, o)
	if err != nil {
		t.Fatal(err)
	}
	lookup := func(_ context.Context, id string) (proto.Message, error) {
		if id == "bad-id" {
			return nil, status.Error(codes.InvalidArgument, "Use a lowercase id.")
		}
		return known[id], nil
	}
	addr := servertest.ServeGRPC(t, func(s *grpc.Server) { Register(s, q, lookup, nil) })
	return q, adminv1.NewAlarmAdminServiceClient(servertest.Dial(t, addr))
}

func wantCode(t *testing.T, call string, err error, want codes.Code) {
	t.Helper()
	if got := status.Code(err); got != want {
		t.Fatalf("%s = %v, want code %v", call, err, want)
	}
}

func TestListPendingShowsTheOldestOverdueAlarm(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	now := time.UnixMilli(1_900_000_000_000)
	q, c := setup(t, alarm.Options{Shards: 4, Now: func() time.Time { return now }}, nil)
	for id, due := range map[string]time.Time{
		"a": now.Add(-3 * time.Second), "b": now.Add(-time.Second), "c": now.Add(time.Minute), "d": now.Add(time.Hour),
	} {
		if err := q.Set(ctx, id, due); err != nil {
			t.Fatal(err)
		}
	}
	res, err := c.ListPending(ctx, &adminv1.ListPendingRequest{NextPerShard: 10})
	if err != nil {
		t.Fatalf("ListPending: %v", err)
	}
	if res.GetNamespace() != "tests" || res.GetNow() != now.UnixMilli() || len(res.GetShards()) != 4 {
		t.Fatalf("ListPending = ns %q, now %d, %d shards; want tests, %d, 4", res.GetNamespace(), res.GetNow(), len(res.GetShards()), now.UnixMilli())
	}
	if res.GetPending() != 4 || res.GetOverdue() != 2 || res.GetInFlight() != 0 || res.GetDead() != 0 {
		t.Fatalf("ListPending totals = %d pending, %d overdue, %d in flight, %d dead; want 4, 2, 0, 0",
			res.GetPending(), res.GetOverdue(), res.GetInFlight(), res.GetDead())
	}
	want := &adminv1.Alarm{Id: "a", Shard: int32(q.ShardOf("a")), DueAt: now.Add(-3 * time.Second).UnixMilli(), LateMs: 3000}
	if !proto.Equal(res.GetOldestOverdue(), want) {
		t.Fatalf("oldest overdue = %v, want %v", res.GetOldestOverdue(), want)
	}
	listed := 0
	for _, s := range res.GetShards() {
		for i, a := range s.GetNext() {
			listed++
			if i > 0 && a.GetDueAt() < s.GetNext()[i-1].GetDueAt() {
				t.Fatalf("shard %d lists %v before %v; want earliest first", s.GetShard(), s.GetNext()[i-1], a)
			}
		}
	}
	if listed != 4 {
		t.Fatalf("ListPending listed %d alarms, want all 4", listed)
	}

	_, err = c.ListPending(ctx, &adminv1.ListPendingRequest{NextPerShard: 101})
	wantCode(t, "ListPending(next 101)", err, codes.InvalidArgument)
	_, err = c.ListPending(ctx, &adminv1.ListPendingRequest{NextPerShard: -1})
	wantCode(t, "ListPending(next -1)", err, codes.InvalidArgument)

	// Nothing late: no oldest overdue.
	q2, c2 := setup(t, alarm.Options{Shards: 2, Now: func() time.Time { return now }}, nil)
	if err := q2.Set(ctx, "x", now.Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	res, err = c2.ListPending(ctx, &adminv1.ListPendingRequest{})
	if err != nil || res.OldestOverdue != nil || res.GetPending() != 1 {
		t.Fatalf("ListPending with nothing late = %v, %v; want 1 pending, no oldest overdue", res, err)
	}
}

// deadQueue runs q with a handler that always fails until want alarms are dead letters.
func deadQueue(t *testing.T, q *alarm.Queue, c adminv1.AlarmAdminServiceClient, ids ...string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- q.Run(ctx, alarm.HandlerFunc(func(context.Context, alarm.Firing) error { return errors.New("downstream refused") }))
	}()
	defer func() { cancel(); <-done }()
	for _, id := range ids {
		if err := q.Set(ctx, id, time.Now()); err != nil {
			t.Fatal(err)
		}
	}
	wait.For(t, "every alarm to be dead-lettered", func() error {
		res, err := c.ListDeadLetters(ctx, &adminv1.ListDeadLettersRequest{})
		if err != nil {
			return err
		}
		if n := len(res.GetDeadLetters()); n != len(ids) {
			return fmt.Errorf("%d dead letters, want %d", n, len(ids))
		}
		return nil
	})
}

func TestDeadLettersListReplayAndDiscard(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	q, c := setup(t, alarm.Options{Shards: 2, MaxRetries: 1, RetryBase: time.Millisecond}, nil)
	deadQueue(t, q, c, "one", "two")

	res, err := c.ListDeadLetters(ctx, &adminv1.ListDeadLettersRequest{})
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range res.GetDeadLetters() {
		if d.GetAttempts() != 2 || d.GetError() != "downstream refused" || d.GetDeadAt() == 0 || int(d.GetShard()) != q.ShardOf(d.GetId()) {
			t.Fatalf("dead letter = %v; want 2 attempts, the handler's error, a time and the id's shard", d)
		}
	}
	pending, err := c.ListPending(ctx, &adminv1.ListPendingRequest{})
	if err != nil || pending.GetDead() != 2 || pending.GetPending() != 0 {
		t.Fatalf("ListPending after dead-lettering = %v, %v; want 2 dead, 0 pending", pending, err)
	}

	before := time.Now().UnixMilli()
	rep, err := c.ReplayDeadLetter(ctx, &adminv1.ReplayDeadLetterRequest{Id: "one"})
	if err != nil {
		t.Fatalf("ReplayDeadLetter(one): %v", err)
	}
	if a := rep.GetAlarm(); a.GetId() != "one" || a.GetDueAt() < before || a.GetInFlight() || a.GetAttempts() != 0 {
		t.Fatalf("ReplayDeadLetter(one) alarm = %v; want due now, fresh, not in flight", a)
	}
	_, err = c.ReplayDeadLetter(ctx, &adminv1.ReplayDeadLetterRequest{Id: "one"})
	wantCode(t, "ReplayDeadLetter(one) twice", err, codes.NotFound)

	if _, err := c.DiscardDeadLetter(ctx, &adminv1.DiscardDeadLetterRequest{Id: "two"}); err != nil {
		t.Fatalf("DiscardDeadLetter(two): %v", err)
	}
	_, err = c.DiscardDeadLetter(ctx, &adminv1.DiscardDeadLetterRequest{Id: "two"})
	wantCode(t, "DiscardDeadLetter(two) twice", err, codes.NotFound)
	_, err = c.ReplayDeadLetter(ctx, &adminv1.ReplayDeadLetterRequest{Id: "two"})
	wantCode(t, "ReplayDeadLetter(two) after discard", err, codes.NotFound)

	res, _ = c.ListDeadLetters(ctx, &adminv1.ListDeadLettersRequest{})
	if len(res.GetDeadLetters()) != 0 {
		t.Fatalf("dead letters after replay and discard = %v, want none", res.GetDeadLetters())
	}
	if _, ok, _ := q.Alarm(ctx, "two"); ok {
		t.Fatalf("discarded object two still has an alarm")
	}

	_, err = c.ReplayDeadLetter(ctx, &adminv1.ReplayDeadLetterRequest{})
	wantCode(t, "ReplayDeadLetter(empty id)", err, codes.InvalidArgument)
	_, err = c.DiscardDeadLetter(ctx, &adminv1.DiscardDeadLetterRequest{})
	wantCode(t, "DiscardDeadLetter(empty id)", err, codes.InvalidArgument)
}

func TestLookupObjectShowsStateAlarmAndDeadLetter(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	due := time.UnixMilli(time.Now().Add(time.Hour).UnixMilli())
	held := &reservationsv1.Reservation{ReservationId: "held-one", Status: "held", CreatedAt: proto.Int64(1000), AlarmAt: proto.Int64(due.UnixMilli())}
	q, c := setup(t, alarm.Options{Shards: 2, MaxRetries: 1, RetryBase: time.Millisecond},
		map[string]proto.Message{"held-one": held, "dead-one": &reservationsv1.Reservation{ReservationId: "dead-one", Status: "held"}})
	if err := q.Set(ctx, "held-one", due); err != nil {
		t.Fatal(err)
	}

	res, err := c.LookupObject(ctx, &adminv1.LookupObjectRequest{Id: "held-one"})
	if err != nil {
		t.Fatalf("LookupObject(held-one): %v", err)
	}
	if !res.GetFound() || res.GetNamespace() != "tests" || int(res.GetShard()) != q.ShardOf("held-one") || res.DeadLetter != nil {
		t.Fatalf("LookupObject(held-one) = %v; want found, in its shard, no dead letter", res)
	}
	obj := res.GetObject().AsMap()
	if obj["reservationId"] != "held-one" || obj["status"] != "held" || obj["createdAt"] != 1000.0 ||
		obj["alarmAt"] != float64(due.UnixMilli()) || obj["expiredAt"] != nil || obj["expirationCount"] != 0.0 {
		t.Fatalf("LookupObject(held-one).object = %v; want JSON names, numbers, null for unset", obj)
	}
	if _, ok := obj["expiredAt"]; !ok {
		t.Fatalf("LookupObject(held-one).object has no expiredAt; want it present as null")
	}
	if a := res.GetAlarm(); a.GetDueAt() != due.UnixMilli() || a.GetInFlight() || a.GetLateMs() != 0 {
		t.Fatalf("LookupObject(held-one).alarm = %v; want due in an hour, not in flight, not late", a)
	}

	deadQueue(t, q, c, "dead-one")
	res, err = c.LookupObject(ctx, &adminv1.LookupObjectRequest{Id: "dead-one"})
	if err != nil || res.Alarm != nil || res.GetDeadLetter().GetError() != "downstream refused" {
		t.Fatalf("LookupObject(dead-one) = %v, %v; want no alarm and the dead letter with its error", res, err)
	}

	res, err = c.LookupObject(ctx, &adminv1.LookupObjectRequest{Id: "nobody"})
	if err != nil || res.GetFound() || res.Object != nil || res.Alarm != nil {
		t.Fatalf("LookupObject(nobody) = %v, %v; want not found, nothing else", res, err)
	}
	_, err = c.LookupObject(ctx, &adminv1.LookupObjectRequest{Id: "bad-id"})
	wantCode(t, "LookupObject(bad-id)", err, codes.InvalidArgument)
	_, err = c.LookupObject(ctx, &adminv1.LookupObjectRequest{})
	wantCode(t, "LookupObject(empty id)", err, codes.InvalidArgument)
}

// TestQueueStateIsExported reads the queue's gauges from the Registerer the queue's own metrics
// go to (a registry of the test's own, not the process default).
func TestQueueStateIsExported(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	now := time.UnixMilli(1_900_000_000_000)
	reg := prometheus.NewRegistry()
	q, _ := setup(t, alarm.Options{Namespace: "gauges", Shards: 4, Now: func() time.Time { return now }, Metrics: reg}, nil)
	for id, due := range map[string]time.Time{"a": now.Add(-3 * time.Second), "b": now.Add(-time.Second), "c": now.Add(time.Minute)} {
		if err := q.Set(ctx, id, due); err != nil {
			t.Fatal(err)
		}
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				if lp.GetName() == "ns" && lp.GetValue() == "gauges" && m.GetGauge() != nil {
					got[mf.GetName()] = m.GetGauge().GetValue()
				}
			}
		}
	}
	want := map[string]float64{
		"vigil_alarm_queue_up": 1, "vigil_alarms_pending": 3, "vigil_alarms_overdue": 2, "vigil_alarms_in_flight": 0,
		"vigil_alarms_dead_letters": 0, "vigil_alarm_oldest_overdue_seconds": 3,
	}
	for name, v := range want {
		if got[name] != v {
			t.Errorf("%s{ns=gauges} = %v, want %v", name, got[name], v)
		}
	}
}
