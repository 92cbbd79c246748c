package service_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	roomv1 "github.com/vigil-dev/vigil/pkg/api/vigil/room/v1"
	"github.com/vigil-dev/vigil/pkg/server/servertest"
	"github.com/vigil-dev/vigil/pkg/wait"
)

// startReplicaProcess builds the room command and runs it as a separate process on the env's
// Redis and Lobby, so the test can kill it with SIGKILL: no clean-up of any kind runs.
func startReplicaProcess(t *testing.T, e *env) (addr string, kill func()) {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "room")
	build := exec.Command("go", "build", "-o", bin, "../cmd/room")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build room: %v\n%s", err, out)
	}
	addr = servertest.FreeAddr(t)
	cmd := exec.Command(bin,
		"-grpc-addr", addr, "-metrics-addr", "", "-redis-url", e.url, "-prefix", e.o.Prefix,
		"-shards", "4", "-lobby-addr", e.proxy, "-idle-ttl", e.o.IdleTTL.String(),
		"-session-lease", e.o.SessionLease.String(), "-log-level", "error")
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatalf("start room process: %v", err)
	}
	kill = func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	}
	t.Cleanup(kill)
	return addr, kill
}

func TestKilledReplicaSessionsStopCounting(t *testing.T) {
	t.Parallel()
	const lease = time.Second
	e := newEnv(t, settings{lease: lease})
	code, token := e.createRoom()
	join(t, e.room, code, leader, "lead", token)
	join(t, e.room, code, viewer, "survivor", "")

	addr, kill := startReplicaProcess(t, e)
	other := roomv1.NewRoomServiceClient(servertest.Dial(t, addr))
	var doomed *member
	wait.Until(t, "the second replica serves", func() bool {
		m, err := tryJoin(t, other, code, viewer, "doomed-1", "")
		doomed = m
		return err == nil
	})
	join(t, other, code, viewer, "doomed-2", "")
	wait.Until(t, "lobby shows 3 viewers", viewers(e, code, 3, true))

	kill()
	killed := time.Now()
	// The dead replica's sessions stop counting once their lease ends (the sweeper alarm runs on
	// the surviving replica): within the lease, plus up to a third of it since the last renewal,
	// plus the alarm's own lateness.
	wait.Until(t, "lobby shows only the surviving viewer", viewers(e, code, 1, true))
	t.Logf("killed replica's sessions stopped counting %v after the kill (lease %v)", time.Since(killed), lease)
	if doomed.state == nil {
		t.Fatal("no state on the killed replica")
	}
}
