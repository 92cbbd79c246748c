package service

import (
	"context"

	"google.golang.org/protobuf/proto"

	"github.com/vigil-dev/vigil/pkg/alarmadmin"
	locksv1 "github.com/vigil-dev/vigil/pkg/api/vigil/locks/v1"
	"github.com/vigil-dev/vigil/services/locks/internal/transport"
)

// lockLookup shows a lock to the admin service as Get answers it: a lock is always there, held
// or free (its fencing counter outlives its holders).
func lockLookup(s *transport.Server) alarmadmin.Lookup {
	return func(ctx context.Context, id string) (proto.Message, error) {
		return s.Get(ctx, &locksv1.GetRequest{Resource: id})
	}
}
