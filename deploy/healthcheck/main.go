// Command healthcheck is the health probe baked into Vigil's scratch images, which have no
// shell, curl or grpc_health_probe. It exits 0 when the target is healthy and 1 otherwise:
//
//	healthcheck grpc://127.0.0.1:7001      gRPC health check of the server (service "")
//	healthcheck http://127.0.0.1:8080/healthz   HTTP GET answering 2xx
//	healthcheck https://127.0.0.1:8443/healthz  the same over TLS
//
// With VIGIL_TLS_CA (and VIGIL_TLS_CERT/VIGIL_TLS_KEY for mutual TLS) set, as in a deployment
// with TLS on, the probe verifies the target with that CA and presents that certificate.
//
// A second argument bounds the check (default 2s).
//
// With -alive first, a gRPC target passes when the server answers the health check at all,
// whatever the status: a liveness probe, which must not restart a service that is only waiting
// for its Redis (NOT_SERVING is for readiness).
//
//	healthcheck -alive grpc://127.0.0.1:7001
package main

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"strings"
	"time"

	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/vigil-dev/vigil/pkg/grpcdial"
	"github.com/vigil-dev/vigil/pkg/server"
)

func main() {
	args := os.Args
	alive := len(args) > 1 && args[1] == "-alive"
	if alive {
		args = append(args[:1:1], args[2:]...)
	}
	if len(args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: healthcheck [-alive] grpc://host:port | http(s)://host:port/path [timeout]")
		os.Exit(2)
	}
	timeout := 2 * time.Second
	if len(args) > 2 {
		d, err := time.ParseDuration(args[2])
		if err != nil {
			fmt.Fprintln(os.Stderr, "healthcheck: bad timeout:", err)
			os.Exit(2)
		}
		timeout = d
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	if err := check(ctx, args[1], alive); err != nil {
		fmt.Fprintln(os.Stderr, "unhealthy:", err)
		os.Exit(1)
	}
}

func check(ctx context.Context, target string, alive bool) error {
	switch {
	case strings.HasPrefix(target, "grpc://"):
		return checkGRPC(ctx, strings.TrimPrefix(target, "grpc://"), alive)
	case strings.HasPrefix(target, "http://"), strings.HasPrefix(target, "https://"):
		return checkHTTP(ctx, target)
	default:
		return fmt.Errorf("target %q: want grpc://host:port or http(s)://host:port/path", target)
	}
}

func checkGRPC(ctx context.Context, addr string, alive bool) error {
	cred, err := server.TLSFromEnv().DialOption()
	if err != nil {
		return err
	}
	conn, err := grpcdial.New(addr, cred) // as every Vigil client dials: keepalive, the name's every address
	if err != nil {
		return err
	}
	defer conn.Close()
	res, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{})
	if err != nil {
		return err
	}
	if !alive && res.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		return fmt.Errorf("%s is %s", addr, res.GetStatus())
	}
	return nil
}

func checkHTTP(ctx context.Context, url string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	tc, err := server.TLSFromEnv().ClientConfig()
	if err != nil {
		return err
	}
	res, err := (&http.Client{Transport: &http.Transport{TLSClientConfig: tc}}).Do(req)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	if res.StatusCode/100 != 2 {
		return fmt.Errorf("GET %s: %s", url, res.Status)
	}
	return nil
}
