package service

import (
	"context"
	"io"
	"slices"
	"testing"

	reservationsv1 "github.com/vigil-dev/vigil/pkg/api/vigil/reservations/v1"
	"github.com/vigil-dev/vigil/pkg/prom/promtest"
	"github.com/vigil-dev/vigil/pkg/redistest"
	"github.com/vigil-dev/vigil/pkg/redisx"
	"github.com/vigil-dev/vigil/pkg/server"
	"github.com/vigil-dev/vigil/pkg/server/servertest"
)

// start runs the service with o until the test ends and returns its gRPC address. The alarm
// lines are discarded unless o names a writer.
func start(t *testing.T, o Options) string {
	t.Helper()
	if o.AlarmLog == nil {
		o.AlarmLog = io.Discard
	}
	return servertest.StartService(t, "reservations", New, o).Addr
}

// testCore is a Core on the test Redis (a Redis Cluster when VIGIL_TEST_REDIS_CLUSTER is set)
// under a key prefix of the test's own, whose keys are deleted when the test ends.
func testCore(t *testing.T) server.Core {
	t.Helper()
	_, prefix := redistest.Universal(t)
	url, cluster := redistest.Target(t)
	return server.Core{Redis: redisx.Config{URL: url, ClusterAddrs: cluster}, Prefix: prefix}
}

// client is a client of the service at addr, closed when the test ends.
func client(t *testing.T, addr string) reservationsv1.ReservationServiceClient {
	t.Helper()
	return reservationsv1.NewReservationServiceClient(servertest.Dial(t, addr))
}

// Every metric family the service documents (docs/OPERATIONS.md) is registered on the
// Registerer it is given, none on the process's default registry only.
func TestEveryMetricOnTheGivenRegisterer(t *testing.T) {
	t.Parallel()
	servertest.CheckRegisterer(t, func(ctx context.Context, core server.Core) (server.Service, error) {
		return New(ctx, Options{Core: core})
	}, slices.Concat(promtest.ServerFamilies, promtest.AlarmFamilies)...)
}
