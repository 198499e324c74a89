package main

import (
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/fencer-io/fencer/api/client"
	"github.com/fencer-io/fencer/cmd/fencer/internal/cli"
	"github.com/fencer-io/fencer/cmd/fencer/internal/clientcmd"
	tc "github.com/fencer-io/fencer/test/testcluster"
)

// startFencer runs the command line in-process in the background.
func startFencer(t *testing.T, args ...string) (out, stderr *tc.SyncBuffer, done <-chan error) {
	t.Helper()
	out, stderr = &tc.SyncBuffer{}, &tc.SyncBuffer{}
	root := newRootCmd(out, stderr)
	root.SetIn(strings.NewReader(""))
	root.SetArgs(args)
	ch := make(chan error, 1)
	go func() { ch <- root.Execute() }()
	return out, stderr, ch
}

func waitDone(t *testing.T, done <-chan error) error {
	t.Helper()
	select {
	case err := <-done:
		return err
	case <-time.After(20 * time.Second):
		t.Fatal("fencer exec did not return")
		return nil
	}
}

// lockHeld reports whether the lock is held, and its token.
func lockHeld(t *testing.T, name string) (bool, uint64) {
	t.Helper()
	st := lockStatus(t, name)
	return st.Held, st.Token
}

// dropRenewals makes every renewal the commands send fail, as if the network
// dropped it, so that "fencer exec" loses its lease.
func dropRenewals(t *testing.T) {
	t.Helper()
	cli.ExtraClientOptions = []client.Option{client.WithHTTPClient(&http.Client{Transport: renewDropper{}})}
	t.Cleanup(func() { cli.ExtraClientOptions = nil })
}

type renewDropper struct{}

func (renewDropper) RoundTrip(req *http.Request) (*http.Response, error) {
	if strings.HasSuffix(req.URL.Path, "/renew") {
		if req.Body != nil {
			req.Body.Close()
		}
		return nil, errors.New("renewal dropped by the test")
	}
	return http.DefaultTransport.RoundTrip(req)
}

var tokenLine = regexp.MustCompile(`token=(\d+) lock=(\S+) endpoints=(\S+)`)

// The child sees the token, holds the lock while it runs, and its exit
// status passes through; the lock is free right after.
func TestExecRunsCommandUnderLock(t *testing.T) {
	newTestCluster(t)
	gate := filepath.Join(t.TempDir(), "go")
	script := `echo "token=$FENCER_TOKEN lock=$FENCER_LOCK endpoints=$FENCER_ENDPOINTS"; while [ ! -e ` + gate + ` ]; do sleep 0.02; done; exit 3`
	out, _, done := startFencer(t, "exec", "batch", "--ttl", "2s", "--", "sh", "-c", script)
	tc.Poll(t, 10*time.Second, "the child's token line", func() bool { return tokenLine.MatchString(out.String()) })
	m := tokenLine.FindStringSubmatch(out.String())
	if m[2] != "batch" || m[3] != os.Getenv("FENCER_ENDPOINTS") {
		t.Fatalf("child env: %q", out.String())
	}
	held, token := lockHeld(t, "batch")
	if !held || strconv.FormatUint(token, 10) != m[1] {
		t.Fatalf("lock held %v token %d while the child saw %s", held, token, m[1])
	}
	if err := os.WriteFile(gate, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	err := waitDone(t, done)
	if cli.ExitCode(err) != 3 {
		t.Fatalf("exit: %v (code %d), want 3", err, cli.ExitCode(err))
	}
	if held, _ := lockHeld(t, "batch"); held {
		t.Fatal("lock still held after the child exited")
	}

	// Death by signal N is status 128+N; success is no error at all.
	_, _, done = startFencer(t, "exec", "batch", "--", "sh", "-c", "kill -KILL $$")
	if err := waitDone(t, done); cli.ExitCode(err) != 128+9 {
		t.Fatalf("killed child: %v (code %d)", err, cli.ExitCode(err))
	}
	_, _, done = startFencer(t, "exec", "batch", "--", "true")
	if err := waitDone(t, done); err != nil {
		t.Fatalf("true: %v", err)
	}
	_, _, done = startFencer(t, "exec", "batch", "--", "/nonexistent/program")
	if err := waitDone(t, done); cli.ExitCode(err) != 127 {
		t.Fatalf("missing program: %v (code %d)", err, cli.ExitCode(err))
	}
	if held, _ := lockHeld(t, "batch"); held {
		t.Fatal("lock held after a failed start")
	}
}

// SIGINT sent to fencer reaches the child, whose status passes through.
func TestExecForwardsSignals(t *testing.T) {
	newTestCluster(t)
	out, _, done := startFencer(t, "exec", "sig", "--", "sh", "-c", `trap 'echo got-int; exit 5' INT; echo ready; while :; do sleep 0.02; done`)
	tc.Poll(t, 10*time.Second, "child ready", func() bool { return strings.Contains(out.String(), "ready") })
	// fencer registered for SIGINT before starting the child, so this
	// signal goes to its handler, not to the test process's default.
	if err := syscall.Kill(os.Getpid(), syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	if err := waitDone(t, done); cli.ExitCode(err) != 5 || !strings.Contains(out.String(), "got-int") {
		t.Fatalf("exit %v (code %d), output %q", err, cli.ExitCode(err), out.String())
	}
	if held, _ := lockHeld(t, "sig"); held {
		t.Fatal("lock still held")
	}
}

// With renewals dropped, the lease is lost: the child gets SIGTERM, fencer
// says so in one line and exits 75.
func TestExecLeaseLostTerminatesChild(t *testing.T) {
	newTestCluster(t)
	dropRenewals(t)
	out, _, done := startFencer(t, "exec", "doomed", "--ttl", "600ms", "--grace", "10s", "--",
		"sh", "-c", `trap 'echo got-term; exit 0' TERM; echo ready; while :; do sleep 0.02; done`)
	start := time.Now()
	err := waitDone(t, done)
	var ee *cli.ExitError
	if !errors.As(err, &ee) || ee.Code != clientcmd.ExitLeaseLost {
		t.Fatalf("exit %v, want status %d", err, clientcmd.ExitLeaseLost)
	}
	msg := cli.OneLine(err)
	if !strings.HasPrefix(msg, `lease on "doomed" lost (`) || !strings.HasSuffix(msg, "; child terminated") || !strings.Contains(msg, "lease expired") {
		t.Fatalf("message %q", msg)
	}
	if !strings.Contains(out.String(), "got-term") {
		t.Fatalf("child did not see SIGTERM: %q", out.String())
	}
	if time.Since(start) > 5*time.Second {
		t.Fatalf("took %v: the child should have stopped on SIGTERM, well before the grace", time.Since(start))
	}
	t.Logf("fencer: %s", msg)
}

// A child that ignores SIGTERM is killed, with its process group, after the
// grace period.
func TestExecLeaseLostKillsStubbornChild(t *testing.T) {
	newTestCluster(t)
	dropRenewals(t)
	const grace = 300 * time.Millisecond
	start := time.Now()
	out, _, done := startFencer(t, "exec", "stubborn", "--ttl", "600ms", "--grace", grace.String(), "--",
		"sh", "-c", `trap '' TERM; sleep 60 & echo "pgid=$$"; wait`)
	tc.Poll(t, 10*time.Second, "child started", func() bool { return strings.Contains(out.String(), "pgid=") })
	pgid, err := strconv.Atoi(strings.TrimSpace(strings.TrimPrefix(out.String(), "pgid=")))
	if err != nil {
		t.Fatalf("child output %q", out.String())
	}
	err = waitDone(t, done)
	if cli.ExitCode(err) != clientcmd.ExitLeaseLost || !strings.HasSuffix(cli.OneLine(err), "child killed after 300ms grace") {
		t.Fatalf("exit %v (code %d)", err, cli.ExitCode(err))
	}
	t.Logf("lease lost, child killed and reaped %v after start", time.Since(start).Round(time.Millisecond))
	// The background sleep, which ignored SIGTERM too, died with the group.
	tc.Poll(t, 5*time.Second, "the child's process group to be gone", func() bool {
		return syscall.Kill(-pgid, 0) == syscall.ESRCH
	})
	// Nobody released the lost lease: the server expires it.
	tc.Poll(t, 5*time.Second, "server-side expiry", func() bool {
		held, _ := lockHeld(t, "stubborn")
		return !held
	})
}

// With -o json, fencer exec reports what it did as the last line of stdout
// (after the command's own output), and its errors as JSON on stderr.
func TestExecJSONReport(t *testing.T) {
	newTestCluster(t)
	lastLine := func(out string) clientcmd.ExecReport {
		t.Helper()
		lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
		var r clientcmd.ExecReport
		if err := json.Unmarshal([]byte(lines[len(lines)-1]), &r); err != nil {
			t.Fatalf("last line of %q: %v", out, err)
		}
		return r
	}
	code, out, stderr := runFencer(t, "exec", "report", "-o", "json", "--", "sh", "-c", "echo child output; exit 3")
	r := lastLine(out)
	if code != 3 || !strings.HasPrefix(out, "child output\n") || r.Lock != "report" || r.Token == 0 || r.ExitCode != 3 || r.LeaseLost {
		t.Fatalf("exit %d, stdout %q, report %+v", code, out, r)
	}
	var e cli.ErrorBody
	if err := json.Unmarshal([]byte(stderr), &e); err != nil || e.Code != cli.CodeCommandFailed {
		t.Fatalf("stderr %q: %v", stderr, err)
	}

	dropRenewals(t)
	code, out, stderr = runFencer(t, "exec", "report", "-o", "json", "--ttl", "600ms", "--",
		"sh", "-c", `trap 'exit 0' TERM; while :; do sleep 0.02; done`)
	if r := lastLine(out); code != clientcmd.ExitLeaseLost || !r.LeaseLost || r.ExitCode != 0 {
		t.Fatalf("lease lost: exit %d, report %+v", code, r)
	}
	// The command's shell may have said "Terminated" on the same stderr.
	lines := strings.Split(strings.TrimSuffix(stderr, "\n"), "\n")
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &e); err != nil || e.Code != cli.CodeLeaseExpired {
		t.Fatalf("lease lost: stderr %q: %v", stderr, err)
	}
}
