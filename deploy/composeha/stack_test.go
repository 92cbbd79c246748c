//go:build composeha

package composeha

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"
)

// stack is the HA compose project the test runs, under its own project name and gateway port
// so it never meets `make compose-up`'s or the pause suite's.
type stack struct {
	t       *testing.T
	dir     string // deploy/
	project string
	port    string
	base    string // the gateway, http://127.0.0.1:<port>
	compose []string
	files   []string
	env     []string
}

// newStack finds docker and compose; the stack is taken down (volumes too) when t ends,
// unless VIGIL_HA_KEEP=1.
func newStack(t *testing.T) *stack {
	t.Helper()
	if _, err := exec.LookPath("docker"); err != nil {
		t.Fatal("docker is not installed: this suite runs the compose stack")
	}
	_, self, _, _ := runtime.Caller(0)
	s := &stack{t: t, dir: filepath.Join(filepath.Dir(self), ".."),
		project: envOr("VIGIL_HA_PROJECT", "vigilha"), port: envOr("VIGIL_HA_HTTP_PORT", "18092")}
	s.base = "http://127.0.0.1:" + s.port
	s.files = []string{"-f", filepath.Join(s.dir, "docker-compose.yml"), "-f", filepath.Join(s.dir, "docker-compose.ha.yml")}
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
			t.Fatalf("image %s is missing: run make images (make test-compose-ha does)", name)
		}
	}
	if exec.Command("docker", "image", "inspect", envOr("VIGIL_REDIS_IMAGE", "vigil/redis:local")).Run() != nil {
		t.Fatal("the Redis image is missing: the HA nodes need vigil/redis:local (deploy/redis/build-image.sh; make test-compose-ha builds it)")
	}
	s.env = append(os.Environ(), "VIGIL_HA=1", "VIGIL_INSECURE=1", "VIGIL_COMPOSE_PROJECT="+s.project,
		"VIGIL_HTTP_PORT="+s.port, "VIGIL_COMPOSE_WAIT=300")
	t.Cleanup(func() {
		if os.Getenv("VIGIL_HA_KEEP") == "1" {
			t.Logf("VIGIL_HA_KEEP=1: the stack stays up (project %s)", s.project)
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

// up starts the stack the way an operator does, with deploy/compose-up.sh, which waits until
// every container is healthy.
func (s *stack) up() {
	s.t.Helper()
	start := time.Now()
	cmd := exec.Command(filepath.Join(s.dir, "compose-up.sh"))
	cmd.Env = s.env
	if out, err := cmd.CombinedOutput(); err != nil {
		s.t.Fatalf("VIGIL_HA=1 VIGIL_INSECURE=1 compose-up.sh: %v\n%s", err, out)
	}
	s.t.Logf("HA stack up in %.1f s (load %s)", time.Since(start).Seconds(), loadavg())
}

// dc runs compose on the project with the HA files.
func (s *stack) dc(args ...string) (string, error) {
	full := append(append(append([]string{}, s.compose[1:]...), s.files...), append([]string{"-p", s.project}, args...)...)
	cmd := exec.Command(s.compose[0], full...)
	cmd.Env = s.env
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// docker runs the docker CLI.
func docker(args ...string) (string, error) {
	out, err := exec.Command("docker", args...).CombinedOutput()
	return strings.TrimSpace(string(out)), err
}

// container is the id of the running (or paused, or stopped) container of a compose service.
func (s *stack) container(service string) string {
	s.t.Helper()
	id, err := s.containerOf(service)
	if err != nil {
		s.t.Fatal(err)
	}
	return id
}

// containerOf is container without failing the test.
func (s *stack) containerOf(service string) (string, error) {
	out, err := docker("ps", "-aq", "--filter", "label=com.docker.compose.project="+s.project, "--filter", "label=com.docker.compose.service="+service)
	if err != nil || out == "" || len(strings.Fields(out)) != 1 {
		return "", fmt.Errorf("the container of %s: %q %v", service, out, err)
	}
	return out, nil
}

// sentinelCLI runs redis-cli against the first sentinel that answers.
func (s *stack) sentinelCLI(args ...string) (string, error) {
	var last error
	for _, name := range []string{"sentinel-1", "sentinel-2", "sentinel-3"} {
		id, err := s.containerOf(name)
		if err != nil {
			last = err
			continue
		}
		out, err := docker(append([]string{"exec", id, "redis-cli", "-p", "26379"}, args...)...)
		if err == nil {
			return out, nil
		}
		last = fmt.Errorf("%s: %v: %s", name, err, out)
	}
	return "", last
}

// primary is the node the sentinels name the domain's primary (a compose service name: the
// sentinels announce hostnames).
func (s *stack) primary(domain string) (string, error) {
	out, err := s.sentinelCLI("sentinel", "get-master-addr-by-name", "vigil-"+domain)
	if err != nil {
		return "", err
	}
	f := strings.Fields(out)
	if len(f) != 2 {
		return "", fmt.Errorf("get-master-addr-by-name vigil-%s: %q", domain, out)
	}
	return f[0], nil
}

// replicaOf reports whether node is a connected replica of primary (its own ROLE).
func (s *stack) replicaOf(node, primary string) error {
	id, err := s.containerOf(node)
	if err != nil {
		return err
	}
	out, err := docker("exec", id, "redis-cli", "role")
	if err != nil {
		return fmt.Errorf("role of %s: %v: %s", node, err, out)
	}
	f := strings.Fields(out)
	if len(f) < 4 || f[0] != "slave" || f[1] != primary || f[3] != "connected" {
		return fmt.Errorf("role of %s: %q, want a connected replica of %s", node, strings.Join(f, " "), primary)
	}
	return nil
}

// tilts counts the +tilt events in each sentinel's log (Sentinel stops failing over in TILT).
func (s *stack) tilts() string {
	var parts []string
	for _, name := range []string{"sentinel-1", "sentinel-2", "sentinel-3"} {
		id, _ := s.containerOf(name)
		out, _ := docker("logs", id)
		parts = append(parts, fmt.Sprintf("%s %d", name, strings.Count(out, "+tilt")))
	}
	return strings.Join(parts, ", ")
}

// tiltLines is the lines of the sentinels' logs about TILT mode, for the report.
func (s *stack) tiltLines() string {
	var lines []string
	for _, name := range []string{"sentinel-1", "sentinel-2", "sentinel-3"} {
		id, _ := s.containerOf(name)
		out, _ := docker("logs", id)
		for _, line := range strings.Split(out, "\n") {
			if strings.Contains(line, "tilt") {
				lines = append(lines, name+": "+line)
			}
		}
	}
	return strings.Join(lines, "\n")
}

// timing is what the compose file gives the sentinels and the services.
type timing struct {
	downAfter, failoverTimeout, callTimeout time.Duration
}

// bound is the longest a domain may stay unanswered across a failover: the sentinels' down-after
// (the primary is judged down), their failover timeout (the bound on one failover attempt) and
// the services' Redis call timeout (the call in flight when it went).
func (tm timing) bound() time.Duration { return tm.downAfter + tm.failoverTimeout + tm.callTimeout }

// readTiming reads the defaults of docker-compose.ha.yml (or the variables that override them).
func (s *stack) readTiming() timing {
	s.t.Helper()
	b, err := os.ReadFile(filepath.Join(s.dir, "docker-compose.ha.yml"))
	if err != nil {
		s.t.Fatal(err)
	}
	get := func(name, unit string) time.Duration {
		v := os.Getenv(name)
		if v == "" {
			m := regexp.MustCompile(`\$\{` + name + `:-(\d+)` + unit + `\}`).FindSubmatch(b)
			if m == nil {
				s.t.Fatalf("docker-compose.ha.yml has no default for %s", name)
			}
			v = string(m[1])
		}
		v = strings.TrimSuffix(v, unit)
		n, err := strconv.Atoi(v)
		if err != nil {
			s.t.Fatalf("%s=%q: %v", name, v, err)
		}
		if unit == "s" {
			return time.Duration(n) * time.Second
		}
		return time.Duration(n) * time.Millisecond
	}
	return timing{
		downAfter:       get("VIGIL_SENTINEL_DOWN_AFTER_MS", ""),
		failoverTimeout: get("VIGIL_SENTINEL_FAILOVER_TIMEOUT_MS", ""),
		callTimeout:     get("VIGIL_REDIS_TIMEOUT", "s"),
	}
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
	start, end time.Time
	code       int // 0: no answer before the client gave up
	body       []byte
}

// answered is whether the gateway gave an answer that is not "unavailable".
func (c restCall) answered() bool { return c.code != 0 && c.code < 500 }

// call makes one REST call, giving up after the gateway's own deadline (8 s) plus waitMs and 4 s.
func (s *stack) call(ctx context.Context, method, path, body string, waitMs int) restCall {
	c := restCall{start: time.Now()}
	ctx, cancel := context.WithTimeout(ctx, time.Duration(waitMs)*time.Millisecond+12*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, method, s.base+path, strings.NewReader(body))
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err == nil {
		var buf bytes.Buffer
		_, _ = buf.ReadFrom(resp.Body)
		resp.Body.Close()
		c.code, c.body = resp.StatusCode, buf.Bytes()
	}
	c.end = time.Now()
	return c
}

// every runs cond at most every 500 ms under wait.Within: a docker exec per 5 ms poll would
// load the machine the test measures.
func every(cond func() error) func() error {
	var last time.Time
	var lastErr error = fmt.Errorf("not checked yet")
	return func() error {
		if time.Since(last) < 500*time.Millisecond {
			return lastErr
		}
		last = time.Now()
		lastErr = cond()
		return lastErr
	}
}
