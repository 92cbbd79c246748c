package redisx_test

import (
	"testing"

	"github.com/vigil-dev/vigil/pkg/redistest"
)

// TestMain stops the shared Redis (or Redis Cluster) the tests started.
func TestMain(m *testing.M) { redistest.Main(m) }
