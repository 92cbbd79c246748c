package servertest

import (
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"

	"github.com/vigil-dev/vigil/pkg/wait"
)

// Process is a service's command running as a child process, as in the compose deployment, so
// a test can SIGKILL it (no clean-up of any kind runs), SIGTERM it (its graceful drain) or
// pause it.
type Process struct {
	cmd  *exec.Cmd
	once sync.Once
}

// StartProcess runs service name's command (services/<name>/cmd/<name>, built once per test
// binary) listening on addr, with no metrics listener, logging errors only, and args; it
// returns once the process listens. The test's cleanup kills it.
func StartProcess(t testing.TB, name, addr string, args ...string) *Process {
	t.Helper()
	cmd := exec.Command(serviceBinary(t, name), append([]string{"-grpc-addr", addr, "-metrics-addr", "", "-log-level", "error"}, args...)...)
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	p := &Process{cmd: cmd}
	t.Cleanup(func() { p.End(syscall.SIGKILL) })
	wait.For(t, name+" listens on "+addr, func() error {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			_ = c.Close()
		}
		return err
	})
	return p
}

// End sends sig and waits for the process to exit; only the first End does anything.
func (p *Process) End(sig syscall.Signal) {
	p.once.Do(func() {
		_ = p.cmd.Process.Signal(sig)
		_ = p.cmd.Wait()
	})
}

// Signal sends sig and returns at once: SIGSTOP pauses the process, SIGCONT resumes it.
func (p *Process) Signal(sig syscall.Signal) error { return p.cmd.Process.Signal(sig) }

// built is each service's command built so far in this test binary, by name.
var built = struct {
	sync.Mutex
	bin map[string]string
}{bin: map[string]string{}}

// serviceBinary builds service name's command once per test binary and returns its path.
func serviceBinary(t testing.TB, name string) string {
	t.Helper()
	built.Lock()
	defer built.Unlock()
	if bin, ok := built.bin[name]; ok {
		return bin
	}
	dir, err := os.MkdirTemp("", "vigil-service-bin")
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, name)
	out, err := exec.Command("go", "build", "-o", bin, "github.com/vigil-dev/vigil/services/"+name+"/cmd/"+name).CombinedOutput()
	if err != nil {
		t.Fatalf("go build %s: %v\n%s", name, err, out)
	}
	built.bin[name] = bin
	return bin
}
