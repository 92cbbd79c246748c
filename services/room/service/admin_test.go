package service_test

import (
	"context"
	"testing"

	adminv1 "github.com/vigil-dev/vigil/pkg/api/vigil/admin/v1"
	"github.com/vigil-dev/vigil/pkg/server/servertest"
)

// TestAdminLooksUpARoom checks the admin service the room service registers: a room the Lobby
// lists is found with its Lobby fields; an unknown code is not found.
func TestAdminLooksUpARoom(t *testing.T) {
	t.Parallel()
	e := newEnv(t, settings{})
	code, _ := e.createRoom()
	admin := adminv1.NewAlarmAdminServiceClient(servertest.Dial(t, e.startRoom()))
	ctx := context.Background()
	res, err := admin.LookupObject(ctx, &adminv1.LookupObjectRequest{Id: code})
	if err != nil {
		t.Fatalf("LookupObject(%s): %v", code, err)
	}
	if obj := res.GetObject().AsMap(); res.GetNamespace() != "room" || !res.GetFound() || obj["name"] != "Practice" || obj["code"] != code {
		t.Fatalf("LookupObject(%s) = %v; want the room as the Lobby lists it", code, res)
	}
	res, err = admin.LookupObject(ctx, &adminv1.LookupObjectRequest{Id: "nosuchroom"})
	if err != nil || res.GetFound() {
		t.Fatalf("LookupObject(nosuchroom) = %v, %v; want not found", res, err)
	}
	if _, err := admin.ListPending(ctx, &adminv1.ListPendingRequest{}); err != nil {
		t.Fatalf("ListPending: %v", err)
	}
}
