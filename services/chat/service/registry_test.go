package service_test

import (
	"context"
	"slices"
	"testing"

	"github.com/vigil-dev/vigil/pkg/prom/promtest"
	"github.com/vigil-dev/vigil/pkg/redistest"
	"github.com/vigil-dev/vigil/pkg/redisx"
	"github.com/vigil-dev/vigil/pkg/server"
	"github.com/vigil-dev/vigil/services/chat/service"
)

// Every metric family the service documents (docs/OPERATIONS.md) is registered on the
// Registerer it is given, none on the process's default registry only.
func TestEveryMetricOnTheGivenRegisterer(t *testing.T) {
	t.Parallel()
	_, prefix := redistest.Client(t)
	reg := promtest.NewRegistry()
	ctx, cancel := context.WithCancel(context.Background())
	svc, err := service.New(ctx, service.Options{Core: server.Core{Redis: redisx.Config{URL: redistest.URL(t)}, Prefix: prefix, Registerer: reg}})
	if err != nil {
		t.Fatalf("New = %v", err)
	}
	cancel()
	if err := svc.Serve(ctx); err != nil {
		t.Errorf("Serve = %v", err)
	}
	want := slices.Concat(promtest.ServerFamilies)
	if missing := reg.Missing(want...); len(missing) > 0 {
		t.Errorf("families missing from the given Registerer: %v", missing)
	}
}
