package service

import (
	"context"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	adminv1 "github.com/vigil-dev/vigil/pkg/api/vigil/admin/v1"
	reservationsv1 "github.com/vigil-dev/vigil/pkg/api/vigil/reservations/v1"
	"github.com/vigil-dev/vigil/pkg/server/servertest"
)

// TestAdminLooksUpAReservationAndItsAlarm checks the admin service the reservations service
// registers: a hold is found with its alarm at its expiry, a missing one is not found.
func TestAdminLooksUpAReservationAndItsAlarm(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	conn := servertest.Dial(t, start(t, Options{Core: testCore(t)}))

	created, err := reservationsv1.NewReservationServiceClient(conn).CreateReservation(ctx,
		&reservationsv1.CreateReservationRequest{ReservationId: "seat-1", TtlSeconds: 60})
	if err != nil {
		t.Fatal(err)
	}
	admin := adminv1.NewAlarmAdminServiceClient(conn)
	res, err := admin.LookupObject(ctx, &adminv1.LookupObjectRequest{Id: "seat-1"})
	if err != nil {
		t.Fatalf("LookupObject(seat-1): %v", err)
	}
	obj := res.GetObject().AsMap()
	if !res.GetFound() || res.GetNamespace() != "reservations" || obj["status"] != "held" ||
		res.GetAlarm().GetDueAt() != created.GetReservation().GetExpiresAt() {
		t.Fatalf("LookupObject(seat-1) = %v; want the held reservation with its alarm at expiresAt %d", res, created.GetReservation().GetExpiresAt())
	}
	res, err = admin.LookupObject(ctx, &adminv1.LookupObjectRequest{Id: "never-made"})
	if err != nil || res.GetFound() || res.Alarm != nil {
		t.Fatalf("LookupObject(never-made) = %v, %v; want not found", res, err)
	}
	_, err = admin.LookupObject(ctx, &adminv1.LookupObjectRequest{Id: "Not Valid"})
	if status.Code(err) != codes.InvalidArgument {
		t.Fatalf("LookupObject(Not Valid) = %v, want InvalidArgument", err)
	}
	pending, err := admin.ListPending(ctx, &adminv1.ListPendingRequest{})
	if err != nil || pending.GetPending() != 1 || len(pending.GetShards()) != 16 {
		t.Fatalf("ListPending = %v, %v; want 1 pending over 16 shards", pending, err)
	}
}
