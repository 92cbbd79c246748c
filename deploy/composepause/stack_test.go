//go:build composepause

package composepause

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/vigil-dev/vigil/pkg/wait"
)

// stack is the compose project the tests run: deploy/docker-compose.yml (the open stack: no
// keys, no TLS, so no rate limit stands between 60 clients on one address and the gateway)
// under its own project name and gateway port, so it never meets `make compose-up`'s.
type stack struct {
	t       *testing.T
	project string
	port    string
	base    string // the gateway, http://127.0.0.1:<port>
	compose []string
	file    string
}

// newStack finds docker and compose; the stack is taken down (volumes too) when t ends,
// unless VIGIL_PAUSE_KEEP=1.
func newStack(t *testing.T) *stack {
	t.Helper()
	if _, err := exec.LookPath("docker"); err != nil {
		t.Fatal("docker is not installed: this suite runs the compose stack")
	}
	s := &stack{t: t, project: envOr("VIGIL_PAUSE_PROJECT", "vigilpause"), port: envOr("VIGIL_PAUSE_HTTP_PORT", "18090")}
	s.base = "http://127.0.0.1:" + s.port
	_, self, _, _ := runtime.Caller(0)
	s.file = filepath.Join(filepath.Dir(self), "..", "docker-compose.yml")
	if exec.Command("docker", "compose", "version").Run() == nil {
		s.compose = []string{"docker", "compose"}
	} else if _, err := exec.LookPath("docker-compose"); err == nil {
		s.compose = []string{"docker-compose"}
	} else {
		t.Fatal("neither `docker compose` nor docker-compose is installed")
	}
	for _, img := range []string{"gateway", "room", "chat", "locks", "lobby", "reservations"} {
		name := envOr("VIGIL_IMAGE_REPO", "vigil") + "/" + img + ":" + envOr("VIGIL_IMAGE_TAG", "local")
		if exec.Command("docker", "image", "inspect", name).Run() != nil {
			t.Fatalf("image %s is missing: run make images (make test-compose-pause does)", name)
		}
	}
	t.Cleanup(func() {
		if os.Getenv("VIGIL_PAUSE_KEEP") == "1" {
			t.Logf("VIGIL_PAUSE_KEEP=1: the stack stays up (project %s)", s.project)
			return
		}
		if out, err := s.dc("down", "-v", "--remove-orphans"); err != nil {
			t.Logf("compose down: %v\n%s", err, out)
		}
	})
	return s
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

// dc runs compose on the project.
func (s *stack) dc(args ...string) (string, error) {
	full := append(append([]string{}, s.compose[1:]...), append([]string{"-f", s.file, "-p", s.project}, args...)...)
	cmd := exec.Command(s.compose[0], full...)
	cmd.Env = append(os.Environ(), "VIGIL_HTTP_PORT="+s.port)
	if os.Getenv("VIGIL_REDIS_IMAGE") == "" && exec.Command("docker", "image", "inspect", "vigil/redis:local").Run() == nil {
		cmd.Env = append(cmd.Env, "VIGIL_REDIS_IMAGE=vigil/redis:local")
	}
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// docker runs the docker CLI.
func docker(args ...string) (string, error) {
	out, err := exec.Command("docker", args...).CombinedOutput()
	return strings.TrimSpace(string(out)), err
}

// up starts (or rescales) the stack with n replicas each of room, chat and locks and waits
// until every container is healthy and the gateway answers.
func (s *stack) up(n int) {
	s.t.Helper()
	start := time.Now()
	ns := strconv.Itoa(n)
	if out, err := s.dc("up", "-d", "--scale", "room="+ns, "--scale", "chat="+ns, "--scale", "locks="+ns); err != nil {
		s.t.Fatalf("compose up --scale room=%d --scale chat=%d --scale locks=%d: %v\n%s", n, n, n, err, out)
	}
	wait.Within(s.t, 4*time.Minute, "every container healthy", func() error {
		for _, svc := range []string{"room", "chat", "locks"} {
			if got := len(s.replicas(svc)); got != n {
				return fmt.Errorf("%d %s replicas running, want %d", got, svc, n)
			}
		}
		out, err := s.dc("ps", "-q")
		if err != nil {
			return err
		}
		ids := strings.Fields(out)
		states, err := docker(append([]string{"inspect", "-f", "{{.Name}} {{if .State.Health}}{{.State.Health.Status}}{{else}}{{.State.Status}}{{end}}"}, ids...)...)
		if err != nil {
			return fmt.Errorf("%v: %s", err, states)
		}
		for _, line := range strings.Split(states, "\n") {
			if !strings.HasSuffix(line, " healthy") {
				return fmt.Errorf("not healthy yet: %s", line)
			}
		}
		resp, err := http.Get(s.base + "/healthz")
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("gateway /healthz: %d", resp.StatusCode)
		}
		return nil
	})
	s.t.Logf("stack up with %d replicas each of room, chat and locks in %.1f s (load %s)", n, time.Since(start).Seconds(), loadavg())
}

// replica is one running container of a service.
type replica struct{ id, name, ip string }

// replicas lists the running containers of a compose service.
func (s *stack) replicas(service string) []replica {
	out, err := docker("ps", "-q", "--filter", "label=com.docker.compose.project="+s.project, "--filter", "label=com.docker.compose.service="+service)
	if err != nil || out == "" {
		return nil
	}
	info, err := docker(append([]string{"inspect", "-f", "{{.Id}} {{.Name}} {{range .NetworkSettings.Networks}}{{.IPAddress}} {{end}}"}, strings.Fields(out)...)...)
	if err != nil {
		return nil
	}
	var rs []replica
	for _, line := range strings.Split(info, "\n") {
		f := strings.Fields(line)
		if len(f) >= 3 {
			rs = append(rs, replica{id: f[0], name: strings.TrimPrefix(f[1], "/"), ip: f[2]})
		}
	}
	sort.Slice(rs, func(i, j int) bool { return rs[i].name < rs[j].name })
	return rs
}

// openStreams is how many streams of a gRPC method a replica has open, from its metrics
// (grpc_server_started_total minus grpc_server_handled_total), read over the compose network.
func openStreams(ctx context.Context, r replica, metricsPort int, method string) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("http://%s:%d/metrics", r.ip, metricsPort), nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	var started, handled float64
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	want := `grpc_method="` + method + `"`
	for sc.Scan() {
		line := sc.Text()
		if !strings.Contains(line, want) {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			continue
		}
		switch {
		case strings.HasPrefix(line, "grpc_server_started_total{"):
			started += v
		case strings.HasPrefix(line, "grpc_server_handled_total{"):
			handled += v
		}
	}
	return int(started - handled), sc.Err()
}

// serving is the replica of a service with the most open streams of method (the one the
// gateway's streams run on), and every replica's count for the log.
func (s *stack) serving(ctx context.Context, service string, metricsPort int, method string) (replica, string) {
	s.t.Helper()
	var best replica
	most := -1
	var counts []string
	for _, r := range s.replicas(service) {
		n, err := openStreams(ctx, r, metricsPort, method)
		if err != nil {
			s.t.Fatalf("metrics of %s: %v", r.name, err)
		}
		counts = append(counts, fmt.Sprintf("%s %d", r.name, n))
		if n > most {
			best, most = r, n
		}
	}
	if most <= 0 {
		s.t.Fatalf("no %s replica has an open %s stream (%s)", service, method, strings.Join(counts, ", "))
	}
	return best, strings.Join(counts, ", ")
}

// loadavg is the machine's load average (1, 5, 15 minutes).
func loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}

// restCall is one REST call's outcome.
type restCall struct {
	what       string
	start, end time.Time
	code       int // 0: no answer before the client gave up
	retryAfter string
	body       []byte
	budget     time.Duration // its waitMs plus 10 s: an answer later than this is a hang
}

// call makes one REST call, giving up at budget plus 5 s (so a hang is seen, and measured).
func (s *stack) call(ctx context.Context, method, path, body string, waitMs int) restCall {
	c := restCall{what: method + " " + path, start: time.Now(), budget: time.Duration(waitMs)*time.Millisecond + 10*time.Second}
	ctx, cancel := context.WithTimeout(ctx, c.budget+5*time.Second)
	defer cancel()
	var rd *bytes.Reader
	if body != "" {
		rd = bytes.NewReader([]byte(body))
	}
	var req *http.Request
	if rd != nil {
		req, _ = http.NewRequestWithContext(ctx, method, s.base+path, rd)
		req.Header.Set("Content-Type", "application/json")
	} else {
		req, _ = http.NewRequestWithContext(ctx, method, s.base+path, nil)
	}
	resp, err := http.DefaultClient.Do(req)
	if err == nil {
		var buf bytes.Buffer
		_, _ = buf.ReadFrom(resp.Body)
		resp.Body.Close()
		c.code, c.retryAfter, c.body = resp.StatusCode, resp.Header.Get("Retry-After"), buf.Bytes()
	}
	c.end = time.Now()
	return c
}

func (c restCall) took() time.Duration { return c.end.Sub(c.start) }
