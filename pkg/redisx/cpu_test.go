package redisx_test

import (
	"context"
	"testing"

	"github.com/vigil-dev/vigil/pkg/redistest"
	"github.com/vigil-dev/vigil/pkg/redisx"
)

func TestServerCPUReadsInfo(t *testing.T) {
	rdb, _ := redistest.Client(t)
	cpu, err := redisx.ServerCPU(context.Background(), rdb)
	if err != nil || cpu <= 0 {
		t.Fatalf("ServerCPU = %v, %v; want a positive time", cpu, err)
	}
}
