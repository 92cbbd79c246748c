package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
)

// The stack as it is deployed: each service a process of its own, built from its cmd package
// and started with its command-line flags, so that each has its own heap, garbage collector
// and scheduler, and every hop between them crosses a process. The benchmark's clients stay
// in this process; the CPU a row reports is this process's plus the children's.

// children are the processes the harness started, and the CPU they have used.
type children struct {
	mu   sync.Mutex
	pids []int
}

// cpu is this process's CPU time plus its running children's, user plus system.
func (c *children) cpu() time.Duration {
	total := processCPU()
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, pid := range c.pids {
		total += procCPU(pid)
	}
	return total
}

// procCPU is a running process's user plus system CPU time, from /proc/<pid>/stat (clock
// ticks of 10 ms: exact enough over a run of thousands of operations); 0 when unreadable.
func procCPU(pid int) time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// The command name, in parentheses, may hold spaces: fields are counted after it.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 13 {
		return 0
	}
	// utime and stime are fields 14 and 15 of the line, 12 and 13 after the name.
	ut, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0
	}
	const tick = 10 * time.Millisecond // USER_HZ is 100 on Linux
	return time.Duration(ut+st) * tick
}

// buildCommands builds the Go commands named by their package directories (relative to the
// Vigil repository holding the working directory) into a temporary directory and returns
// their paths, in order.
func buildCommands(ctx context.Context, pkgs ...string) ([]string, func(), error) {
	root, err := repoRoot()
	if err != nil {
		return nil, nil, err
	}
	return buildCommandsAt(ctx, root, pkgs...)
}

// buildCommandsAt builds the Go commands named by their package directories in the Vigil
// checkout at root (another commit's worktree, to measure it beside this one).
func buildCommandsAt(ctx context.Context, root string, pkgs ...string) ([]string, func(), error) {
	dir, err := os.MkdirTemp("", "vigil-bench-bin-")
	if err != nil {
		return nil, nil, err
	}
	cleanup := func() { _ = os.RemoveAll(dir) }
	var bins []string
	for _, p := range pkgs {
		bin := filepath.Join(dir, filepath.Base(p))
		benchStage("building %s in %s", p, root)
		cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, "./"+p)
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			cleanup()
			return nil, nil, fmt.Errorf("go build ./%s: %v\n%s", p, err, out)
		}
		bins = append(bins, bin)
	}
	return bins, cleanup, nil
}

// repoRoot is the directory holding go.work and services/, the working directory or one of
// its parents.
func repoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.work")); err == nil {
			if _, err := os.Stat(filepath.Join(dir, "services")); err == nil {
				return dir, nil
			}
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("%w: -processes builds the services from source: run vigilbench inside the Vigil repository", errUsage)
		}
		dir = parent
	}
}

// freeAddr is a loopback address with a port nothing listened on a moment ago.
func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	addr := l.Addr().String()
	return addr, l.Close()
}

// Process starts bin with args as a child that lives until the benchmark ends (then it gets
// SIGINT, and SIGKILL 10 s later) and waits until addr accepts connections. Its output goes
// to this process's stderr.
func (h *Harness) Process(ctx context.Context, name, bin, addr string, args ...string) error {
	return h.process(ctx, name, bin, addr, nil, os.Stderr, args...)
}

// process is Process with variables added to the child's environment (GODEBUG=gctrace=1) and
// its stderr going to stderr.
func (h *Harness) process(ctx context.Context, name, bin, addr string, env []string, stderr io.Writer, args ...string) error {
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = os.Stderr, stderr
	if env != nil {
		cmd.Env = append(os.Environ(), env...)
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", name, err)
	}
	exited := make(chan struct{}) // closed when the child has exited; then waitErr is its end
	var waitErr error
	go func() {
		waitErr = cmd.Wait()
		close(exited)
	}()
	pid := cmd.Process.Pid
	h.children.mu.Lock()
	h.children.pids = append(h.children.pids, pid)
	h.children.mu.Unlock()
	h.stack.onStop(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
		h.children.mu.Lock()
		h.children.pids = removePID(h.children.pids, pid)
		h.children.mu.Unlock()
	})
	deadline := time.Now().Add(30 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			_ = c.Close()
			return nil
		}
		select {
		case <-exited:
			return fmt.Errorf("%s exited at start: %v", name, waitErr)
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond): // waiting for the child to listen
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s did not listen on %s within 30s", name, addr)
		}
	}
}

func removePID(pids []int, pid int) []int {
	out := pids[:0]
	for _, p := range pids {
		if p != pid {
			out = append(out, p)
		}
	}
	return out
}

// waitHTTP waits until url answers 200 (a gateway's /healthz), for at most 30 s.
func waitHTTP(ctx context.Context, client *http.Client, url string) error {
	deadline := time.Now().Add(30 * time.Second)
	var last error = errors.New("no answer")
	for time.Now().Before(deadline) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return err
		}
		res, err := client.Do(req)
		if err == nil {
			_ = res.Body.Close()
			if res.StatusCode == http.StatusOK {
				return nil
			}
			err = fmt.Errorf("status %d", res.StatusCode)
		}
		last = err
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond): // waiting for the gateway's backends
		}
	}
	return fmt.Errorf("%s: %v after 30s", url, last)
}
