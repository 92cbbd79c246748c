//go:build nemesis

package nemesis

import (
	"os"
	"testing"

	"github.com/vigil-dev/vigil/pkg/redistest"
)

func TestMain(m *testing.M) {
	if domain := os.Getenv(envDomain); domain != "" {
		os.Exit(runReplica(domain))
	}
	redistest.Main(m)
}
