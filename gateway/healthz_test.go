package gateway

import (
	"fmt"
	"testing"

	"github.com/vigil-dev/vigil/pkg/redistest"
	"github.com/vigil-dev/vigil/pkg/server/servertest"
	"github.com/vigil-dev/vigil/pkg/wait"
	lobby "github.com/vigil-dev/vigil/services/lobby/service"
	"github.com/vigil-dev/vigil/services/reservations/service"
)

// TestHealthzNamesTheBackendWhoseStoreIsDown kills the reservations service's Redis: the service
// keeps running, but /healthz answers 503 naming reservations as not serving, the lobby as fine.
func TestHealthzNamesTheBackendWhoseStoreIsDown(t *testing.T) {
	t.Parallel()
	_, prefix := redistest.Client(t)
	own := redistest.Start(t)
	res := startReservations(t, service.Options{Core: testCore(own.URL(t), prefix, nil)})
	lb := servertest.Start(t, "lobby", servertest.Serve(lobby.New, lobby.Options{Core: testCore(redistest.URL(t), prefix, testLogger(t))}))
	gw := startGateway(t, Backends{Reservations: res.Addr, Lobby: lb.Addr})

	wait.For(t, "/healthz 200 with every store up", func() error {
		if h := call(t, "GET", gw.URL+"/healthz", ""); h.code != 200 || h.body["status"] != "ok" {
			return fmt.Errorf("GET /healthz = %d %s", h.code, h.raw)
		}
		return nil
	})
	own.Kill(t)
	wait.For(t, "/healthz 503 naming reservations", func() error {
		h := call(t, "GET", gw.URL+"/healthz", "")
		backends, _ := h.body["backends"].(map[string]any)
		if h.code != 503 || backends["reservations"] != "NOT_SERVING" || backends["lobby"] != "SERVING" ||
			h.body["error"] != "Not ready: reservations (NOT_SERVING)." {
			return fmt.Errorf("GET /healthz = %d %s; want 503 naming reservations NOT_SERVING, lobby SERVING", h.code, h.raw)
		}
		return nil
	})
}
