package main

import (
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/fencer-io/fencer/cmd/fencer/internal/clientcmd"
	tc "github.com/fencer-io/fencer/test/testcluster"
)

// A fencer exec that is frozen (SIGSTOP) past its lease's deadline stops its
// command as soon as it is thawed, without trusting the renewal it was in
// the middle of.
func TestExecPausedPastDeadline(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	newTestCluster(t)
	bin := tc.BuildFencer(t, t.TempDir())
	var out, stderr tc.SyncBuffer
	cmd := exec.Command(bin, "exec", "frozen", "--ttl", "1s", "--grace", "5s", "--",
		"sh", "-c", `trap 'echo got-term; exit 0' TERM; echo ready; while :; do sleep 0.02; done`)
	cmd.Stdout, cmd.Stderr = &out, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() { cmd.Process.Kill() })
	tc.Poll(t, 10*time.Second, "child ready", func() bool { return strings.Contains(out.String(), "ready") })

	if err := cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	time.Sleep(1500 * time.Millisecond) // the freeze itself, longer than the TTL
	tc.Poll(t, 5*time.Second, "server-side expiry while fencer is frozen", func() bool {
		held, _ := lockHeld(t, "frozen")
		return !held
	})
	thawed := time.Now()
	if err := cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	select {
	case <-exited:
	case <-time.After(10 * time.Second):
		t.Fatal("fencer exec did not stop after the thaw")
	}
	took := time.Since(thawed)
	if code := cmd.ProcessState.ExitCode(); code != clientcmd.ExitLeaseLost {
		t.Fatalf("exit status %d, want %d; stderr %q", code, clientcmd.ExitLeaseLost, stderr.String())
	}
	// The child's shell may report its killed sleep; fencer's own say is one line.
	var lines []string
	for _, l := range strings.Split(stderr.String(), "\n") {
		if strings.HasPrefix(l, "fencer: ") {
			lines = append(lines, l)
		}
	}
	if len(lines) != 1 || !strings.HasPrefix(lines[0], `fencer: lease on "frozen" lost (`) || !strings.HasSuffix(lines[0], "child terminated") {
		t.Fatalf("stderr %q", stderr.String())
	}
	line := lines[0]
	if !strings.Contains(out.String(), "got-term") {
		t.Fatalf("child did not get SIGTERM: %q", out.String())
	}
	if took > time.Second {
		t.Fatalf("took %v after the thaw to stop the child", took)
	}
	t.Logf("thawed fencer stopped its child and exited in %v: %s", took.Round(time.Millisecond), line)
}
