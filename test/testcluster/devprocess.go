package testcluster

import (
	"bytes"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"
)

// SyncBuffer is a bytes.Buffer that several goroutines may use at once: a
// child's output copier or a logger writing, the test reading.
type SyncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *SyncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *SyncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// BuildFencer builds the fencer binary as dir/bin/fencer, where make puts
// it in a checkout, and returns its path.
func BuildFencer(t testing.TB, dir string) string {
	t.Helper()
	bin := filepath.Join(dir, "bin", "fencer")
	if out, err := exec.Command("go", "build", "-o", bin, "github.com/fencer-io/fencer/cmd/fencer").CombinedOutput(); err != nil {
		t.Fatalf("go build fencer: %v\n%s", err, out)
	}
	return bin
}

// DevPorts are the first HTTP and Raft ports of a fencer dev cluster; the
// other nodes' follow. Zero picks free ones.
type DevPorts struct{ HTTP, Raft int }

// FreeDevPorts returns n free consecutive HTTP ports followed by n free
// consecutive Raft ports, for a fencer dev cluster of n nodes.
func FreeDevPorts(t testing.TB, n int) DevPorts {
	t.Helper()
	free := func(base int) bool {
		var lns []net.Listener
		defer func() {
			for _, ln := range lns {
				ln.Close()
			}
		}()
		for p := base; p < base+2*n; p++ {
			ln, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p))
			if err != nil {
				return false
			}
			lns = append(lns, ln)
		}
		return true
	}
	for range 100 {
		// Below the kernel's ephemeral range (32768 and up here), which
		// outgoing connections draw from and could take meanwhile.
		if base := 20000 + rand.IntN(12000); free(base) {
			return DevPorts{HTTP: base, Raft: base + n}
		}
	}
	t.Fatal("no free ports")
	return DevPorts{}
}

// Dev is a fencer dev cluster running as a child process, as a user runs it.
type Dev struct {
	cmd            *exec.Cmd
	exited         chan struct{}
	ports          DevPorts
	tmp            string
	Stdout, Stderr SyncBuffer
}

// URL returns the base URL of node i's API (0 is n1).
func (d *Dev) URL(i int) string {
	return "http://127.0.0.1:" + strconv.Itoa(d.ports.HTTP+i)
}

// Ports returns the first HTTP and Raft ports the cluster runs on.
func (d *Dev) Ports() DevPorts { return d.ports }

// LaunchDev starts name with args, then the port flags (free ones for
// three nodes where ports are zero), with TMPDIR private to the test and
// env added. A name other than "sh" gets the "dev" subcommand first; a
// shell wrapper passes the flags on. The process is killed at the end of
// the test if it is still running.
func LaunchDev(t testing.TB, name string, ports DevPorts, env []string, args ...string) *Dev {
	t.Helper()
	if name != "sh" {
		args = append([]string{"dev"}, args...)
	}
	if ports.HTTP == 0 {
		ports = FreeDevPorts(t, 3)
	}
	d := &Dev{ports: ports, tmp: t.TempDir(), exited: make(chan struct{})}
	args = append(args, "--http-port", strconv.Itoa(ports.HTTP), "--raft-port", strconv.Itoa(ports.Raft))
	d.cmd = exec.Command(name, args...)
	d.cmd.Env = append(append(os.Environ(), "TMPDIR="+d.tmp), env...)
	d.cmd.Stdout, d.cmd.Stderr = &d.Stdout, &d.Stderr
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

// StartDev launches fencer dev (see LaunchDev) and waits, as a user's
// script would, until each of its three nodes answers GET /readyz with 200.
func StartDev(t testing.TB, name string, ports DevPorts, env []string, args ...string) *Dev {
	t.Helper()
	d := LaunchDev(t, name, ports, env, args...)
	Poll(t, 30*time.Second, "every node of fencer dev ready (GET /readyz)", func() bool {
		return AllReady(d.URL(0), d.URL(1), d.URL(2))
	})
	return d
}

// Exited reports whether the process has exited.
func (d *Dev) Exited() bool {
	select {
	case <-d.exited:
		return true
	default:
		return false
	}
}

// Stop sends sig and waits for a clean exit: fencer dev must stop, not be
// killed by the signal.
func (d *Dev) Stop(t testing.TB, sig syscall.Signal) {
	t.Helper()
	if err := d.cmd.Process.Signal(sig); err != nil {
		t.Fatal(err)
	}
	select {
	case <-d.exited:
	case <-time.After(20 * time.Second):
		t.Fatalf("fencer dev still running 20s after %v\nstdout:\n%s\nstderr:\n%s", sig, d.Stdout.String(), d.Stderr.String())
	}
	if st := d.cmd.ProcessState; st.ExitCode() < 0 {
		t.Fatalf("fencer dev was killed by the signal (%v) instead of stopping\nstdout:\n%s", st, d.Stdout.String())
	}
}

// CheckTempRemoved checks that the process left nothing in its TMPDIR (an
// --ephemeral cluster removes its data dir).
func (d *Dev) CheckTempRemoved(t testing.TB) {
	t.Helper()
	left, err := os.ReadDir(d.tmp)
	if err != nil {
		t.Fatal(err)
	}
	if len(left) > 0 {
		t.Fatalf("left behind in TMPDIR: %s", left[0].Name())
	}
}
