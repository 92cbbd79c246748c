package gateway

import (
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/vigil-dev/vigil/pkg/server/servertest"
	"github.com/vigil-dev/vigil/pkg/wait"
)

// TestMetricsOnTheOperatorListener: with MetricsAddr set (the gateway command always sets it),
// /metrics answers there and not on the public port.
func TestMetricsOnTheOperatorListener(t *testing.T) {
	t.Parallel()
	metricsAddr := servertest.FreeAddr(t)
	ctx, cancel := context.WithCancel(context.Background())
	addrc := make(chan net.Addr, 1)
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, Options{Addr: "127.0.0.1:0", MetricsAddr: metricsAddr, Logger: testLogger(t)}, func(a net.Addr) { addrc <- a })
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run = %v after a clean stop", err)
		}
	})
	public := "http://" + (<-addrc).String()

	if res := call(t, "GET", public+"/metrics", ""); res.code != http.StatusNotFound {
		t.Errorf("GET /metrics on the public port = %d %s, want 404", res.code, res.raw)
	}
	if res := call(t, "GET", public+"/healthz", ""); res.code != http.StatusOK {
		t.Errorf("GET /healthz on the public port = %d %s, want 200", res.code, res.raw)
	}
	wait.For(t, "/metrics on the operator listener", func() error {
		res, err := http.Get("http://" + metricsAddr + "/metrics")
		if err != nil {
			return err
		}
		defer res.Body.Close()
		body, _ := io.ReadAll(res.Body)
		if res.StatusCode != http.StatusOK || !strings.Contains(string(body), "go_goroutines") {
			return &unexpected{res.StatusCode, string(body)}
		}
		return nil
	})
}

type unexpected struct {
	code int
	body string
}

func (u *unexpected) Error() string { return http.StatusText(u.code) + ": " + u.body }
