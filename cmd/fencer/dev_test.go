package main

import (
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	tc "github.com/fencer-io/fencer/test/testcluster"
)

// The dev cluster as a user runs it: the built binary, stopped by signals.
func TestDevProcess(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and runs clusters")
	}
	bin := filepath.Join(t.TempDir(), "fencer")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}

	// By default the state is kept (under $XDG_STATE_HOME), so a restarted
	// dev cluster goes on from the tokens it issued before.
	t.Run("KeepsState", func(t *testing.T) {
		env := []string{"XDG_STATE_HOME=" + t.TempDir()}
		var ports devPorts
		ports.http, ports.raft = freeDevPorts(t)
		var last uint64
		for run := range 2 {
			d := startDevProcess(t, bin, ports, env)
			token := devAcquire(t, d.http(0), "kept"+strconv.Itoa(run))
			if token <= last {
				t.Fatalf("run %d: token %d, not above %d from the run before", run+1, token, last)
			}
			last = token
			d.stop(t, syscall.SIGTERM)
		}
		state := strings.TrimPrefix(env[0], "XDG_STATE_HOME=")
		if _, err := os.Stat(filepath.Join(state, "fencer", "dev", "dev.json")); err != nil {
			t.Fatalf("state not in $XDG_STATE_HOME/fencer/dev: %v", err)
		}
	})

	// A clean stop logs no error, even with a request in flight on a
	// follower (which holds its HTTP server open) and the leader last in
	// line: stopping the followers' Raft first would leave the leader
	// failing to reach them until its own turn.
	t.Run("CleanStopLogsNoError", func(t *testing.T) {
		d := startDevProcess(t, bin, devPorts{}, nil, "--ephemeral")
		last := strconv.Itoa(devNodes)
		tc.Do(t, "POST", d.http(0)+"/v1/cluster/leader/transfer", `{"id":"n`+last+`"}`)
		tc.Poll(t, 10*time.Second, "n"+last+" leads", func() bool {
			_, body, _ := tc.Do(t, "GET", d.http(0)+"/v1/cluster", "")
			return strings.Contains(body, `"leader":"n`+last+`"`)
		})
		leader := d.http(devNodes - 1)
		if code, body, _ := tc.Do(t, "POST", leader+"/v1/locks/busy/acquire", `{"holder":"a","ttl_ms":60000}`); code != http.StatusOK {
			t.Fatalf("acquire: %d %s", code, body)
		}
		go http.Post(d.http(1)+"/v1/locks/busy/acquire", "application/json",
			strings.NewReader(`{"holder":"b","ttl_ms":60000,"wait_ms":30000}`))
		tc.Poll(t, 10*time.Second, "a waiter queued", func() bool {
			_, body, _ := tc.Do(t, "GET", leader+"/metrics", "")
			return strings.Contains(body, "\nfencer_waiters 1\n")
		})
		d.stop(t, syscall.SIGTERM)
		if errs := regexp.MustCompile(`(?m)^.*(\[ERROR\]|level=ERROR).*$`).FindAllString(d.stderr.String(), -1); len(errs) > 0 {
			t.Fatalf("a clean stop logged %d errors, the first: %s", len(errs), errs[0])
		}
		d.checkTempRemoved(t)
	})

	// Ctrl-C while the nodes start stops them and removes the throwaway
	// dir: the handler is in place before anything starts.
	t.Run("InterruptDuringStartup", func(t *testing.T) {
		d := launchDevProcess(t, bin, devPorts{}, nil, "--ephemeral")
		tc.Poll(t, 10*time.Second, "startup under way", func() bool {
			return strings.Contains(d.stdout.String(), "removed on exit")
		})
		d.stop(t, syscall.SIGINT)
		if strings.Contains(d.stdout.String(), "\nleader: ") {
			t.Log("the cluster was up before the signal arrived; the stop was not during startup this time")
		}
		d.checkTempRemoved(t)
	})

	// Started by a script with SIGINT ignored (a background job of a
	// non-interactive shell), it still stops on SIGINT.
	t.Run("SIGINTWhenIgnored", func(t *testing.T) {
		d := startDevProcess(t, "sh", devPorts{}, nil, "-c", `trap "" INT; exec "$0" "$@"`, bin, "dev", "--ephemeral")
		d.stop(t, syscall.SIGINT)
		d.checkTempRemoved(t)
	})
}

const devNodes = 3

// devProcess is a fencer dev running on free ports.
type devProcess struct {
	cmd            *exec.Cmd
	exited         chan struct{}
	httpPort       int
	tmp            string
	stdout, stderr syncBuffer
}

func (d *devProcess) http(i int) string {
	return "http://127.0.0.1:" + strconv.Itoa(d.httpPort+i)
}

// devPorts are the first HTTP and Raft ports; zero picks free ones.
type devPorts struct{ http, raft int }

// launchDevProcess starts name with args, then the port flags (a shell
// wrapper passes them on), with TMPDIR private to the test.
func launchDevProcess(t *testing.T, name string, ports devPorts, env []string, args ...string) *devProcess {
	t.Helper()
	if name != "sh" {
		args = append([]string{"dev"}, args...)
	}
	httpPort, raftPort := ports.http, ports.raft
	if httpPort == 0 {
		httpPort, raftPort = freeDevPorts(t)
	}
	d := &devProcess{httpPort: httpPort, tmp: t.TempDir(), exited: make(chan struct{})}
	args = append(args, "--http-port", strconv.Itoa(httpPort), "--raft-port", strconv.Itoa(raftPort))
	d.cmd = exec.Command(name, args...)
	d.cmd.Env = append(append(os.Environ(), "TMPDIR="+d.tmp), env...)
	d.cmd.Stdout, d.cmd.Stderr = &d.stdout, &d.stderr
	if err := d.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { d.cmd.Wait(); close(d.exited) }()
	t.Cleanup(func() {
		select {
		case <-d.exited:
		default:
			d.cmd.Process.Kill()
			<-d.exited
		}
	})
	return d
}

// startDevProcess launches fencer dev and waits for its leader.
func startDevProcess(t *testing.T, name string, ports devPorts, env []string, args ...string) *devProcess {
	t.Helper()
	d := launchDevProcess(t, name, ports, env, args...)
	tc.Poll(t, 30*time.Second, "a leader in fencer dev", func() bool {
		return strings.Contains(d.stdout.String(), "\nleader: ")
	})
	return d
}

// stop sends sig and waits for a clean exit.
func (d *devProcess) stop(t *testing.T, sig syscall.Signal) {
	t.Helper()
	if err := d.cmd.Process.Signal(sig); err != nil {
		t.Fatal(err)
	}
	select {
	case <-d.exited:
	case <-time.After(20 * time.Second):
		t.Fatalf("fencer dev still running 20s after %v\nstdout:\n%s\nstderr:\n%s", sig, d.stdout.String(), d.stderr.String())
	}
	if st := d.cmd.ProcessState; st.ExitCode() < 0 {
		t.Fatalf("fencer dev was killed by the signal (%v) instead of stopping\nstdout:\n%s", st, d.stdout.String())
	}
}

// checkTempRemoved checks that the throwaway data dir is gone.
func (d *devProcess) checkTempRemoved(t *testing.T) {
	t.Helper()
	left, err := os.ReadDir(d.tmp)
	if err != nil {
		t.Fatal(err)
	}
	if len(left) > 0 {
		t.Fatalf("left behind in TMPDIR: %s", left[0].Name())
	}
}

// devAcquire takes a lock for a moment and returns its token.
func devAcquire(t *testing.T, url, name string) uint64 {
	t.Helper()
	code, body, _ := tc.Do(t, "POST", url+"/v1/locks/"+name+"/acquire", `{"holder":"t","ttl_ms":1000}`)
	m := regexp.MustCompile(`"token":(\d+)`).FindStringSubmatch(body)
	if code != http.StatusOK || m == nil {
		t.Fatalf("acquire %s: %d %s", name, code, body)
	}
	token, _ := strconv.ParseUint(m[1], 10, 64)
	return token
}

// freeDevPorts returns the first of devNodes free consecutive HTTP ports and
// the first of devNodes free consecutive Raft ports.
func freeDevPorts(t *testing.T) (httpPort, raftPort int) {
	t.Helper()
	free := func(base int) bool {
		for p := base; p < base+devNodes; p++ {
			ln, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p))
			if err != nil {
				return false
			}
			ln.Close()
		}
		return true
	}
	for range 100 {
		base := 20000 + rand.IntN(20000)
		if free(base) && free(base+devNodes) {
			return base, base + devNodes
		}
	}
	t.Fatal("no free ports")
	return 0, 0
}
