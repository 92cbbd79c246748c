// Package api holds the generated Go clients (protobuf messages, gRPC stubs, grpc-gateway
// handlers) under vigil/<domain>/v1, and the Python client under python/. It is a module of its
// own so that a caller importing the clients gets gRPC, protobuf and grpc-gateway, and nothing of
// what Vigil's services and tests need.
package api

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// The only modules the clients may require directly.
var direct = []string{
	"github.com/grpc-ecosystem/grpc-gateway/v2",
	"google.golang.org/grpc",
	"google.golang.org/protobuf",
}

// Modules that must not be anywhere in the clients' module graph: Vigil's own modules, stores,
// test helpers and what they bring.
var forbidden = []string{
	"github.com/vigil-dev/vigil/",
	"github.com/redis/",
	"github.com/alicebob/miniredis",
	"github.com/testcontainers/",
	"github.com/docker/",
	"github.com/moby/",
	"github.com/prometheus/",
	"github.com/grpc-ecosystem/go-grpc-middleware",
}

// goCmd runs the go command in this module alone (outside the workspace, as a caller sees it).
func goCmd(t *testing.T, args ...string) []byte {
	t.Helper()
	cmd := exec.Command("go", args...)
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=readonly")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return out
}

func TestRequiresOnlyGRPCProtobufAndGateway(t *testing.T) {
	var mod struct {
		Module  struct{ Path string }
		Require []struct {
			Path     string
			Indirect bool
		}
		Replace []struct{ Old struct{ Path string } }
	}
	if err := json.Unmarshal(goCmd(t, "mod", "edit", "-json"), &mod); err != nil {
		t.Fatalf("go mod edit -json: %v", err)
	}
	if mod.Module.Path != "github.com/vigil-dev/vigil/pkg/api" {
		t.Errorf("module path = %q, want github.com/vigil-dev/vigil/pkg/api (callers' imports depend on it)", mod.Module.Path)
	}
	var got []string
	for _, r := range mod.Require {
		if !r.Indirect {
			got = append(got, r.Path)
		}
	}
	slices.Sort(got)
	if !slices.Equal(got, direct) {
		t.Errorf("direct requirements = %v, want %v", got, direct)
	}
	if len(mod.Replace) > 0 {
		t.Errorf("go.mod has %d replace directives; a caller's build ignores them, so the clients must not need any", len(mod.Replace))
	}
}

func TestModuleGraphHasNoStoreOrTestDependencies(t *testing.T) {
	out := goCmd(t, "list", "-m", "all")
	n := 0
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		path, _, _ := strings.Cut(sc.Text(), " ")
		n++
		if path == "github.com/vigil-dev/vigil/pkg/api" {
			continue
		}
		for _, f := range forbidden {
			if strings.HasPrefix(path, f) {
				t.Errorf("go list -m all includes %s (forbidden: %s*)", sc.Text(), f)
			}
		}
	}
	if n < 4 {
		t.Fatalf("go list -m all listed %d modules, want the module and its requirements:\n%s", n, out)
	}
}
