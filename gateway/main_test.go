package gateway

import (
	"testing"

	"github.com/vigil-dev/vigil/pkg/redistest"
)

// TestMain shares one Redis container among the package's tests (each uses its own key
// prefix) and removes it at the end. Every domain's gateway tests use it.
func TestMain(m *testing.M) { redistest.Main(m) }
