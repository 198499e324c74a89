package netfault

import (
	"net"
	"os"
	"os/exec"
	"runtime"
	"sync/atomic"
	"testing"
)

func requireProc(t *testing.T) {
	t.Helper()
	if runtime.GOOS != "linux" {
		t.Skip("DialerPID reads /proc")
	}
}

// A connection accepted here is traced to the process that dialed it, and
// to no other candidate.
func TestDialerPID(t *testing.T) {
	requireProc(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()

	dial(t, ln.Addr().String())
	conn, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if pid, err := DialerPID(conn, []int{1, os.Getpid()}); err != nil || pid != os.Getpid() {
		t.Fatalf("DialerPID = %d, %v; want this process, %d", pid, err, os.Getpid())
	}
	if pid, err := DialerPID(conn, []int{1}); err == nil {
		t.Fatalf("DialerPID among others = %d, want an error", pid)
	}

	// Another process's dial is its, not ours.
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("no bash to dial from another process")
	}
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	child := exec.Command(bash, "-c", "exec 3<>/dev/tcp/127.0.0.1/"+port+"; read -t 30 <&3")
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = child.Process.Kill(); _ = child.Wait() }()
	theirs, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer theirs.Close()
	pid, err := DialerPID(theirs, []int{os.Getpid(), child.Process.Pid})
	if err != nil || pid != child.Process.Pid {
		t.Fatalf("DialerPID of the child's connection = %d, %v; want %d", pid, err, child.Process.Pid)
	}
}

// newTestMesh builds a mesh into one node, n1, for sources "me" (this
// process, as DialerPID finds it) and "other".
func newTestMesh(t *testing.T, identify Identify) *HTTPMesh {
	t.Helper()
	target := newLineServer(t, "n1").addr()
	m, err := NewHTTPMesh(map[string]string{"n1": target}, []string{"me", "other"}, identify)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Close() })
	return m
}

func byPID(conn net.Conn) (string, bool) {
	pid, err := DialerPID(conn, []int{os.Getpid()})
	return "me", err == nil && pid == os.Getpid()
}

// A cut between one source and a node holds at the node's advertised
// address, which everybody dials, and leaves every other source alone.
func TestGateAppliesTheDialersLink(t *testing.T) {
	requireProc(t)
	m := newTestMesh(t, byPID)
	gate := m.GateAddr("n1")
	open := dial(t, gate)
	mustAsk(t, open, "ping", "n1:ping")

	m.Cut("me", "n1")
	mustBreak(t, open.conn)
	mustBeRefused(t, gate)
	mustBeRefused(t, m.Addr("me", "n1"))
	mustAsk(t, dial(t, m.Addr("other", "n1")), "ping", "n1:ping")

	m.HealAll()
	mustAsk(t, dial(t, gate), "ping", "n1:ping")
	if c := m.Counts(); c["me"] != 3 || c[""] != 0 {
		t.Fatalf("counts %v; want 3 from me, none unattributed", c)
	}

	m.CutOneWay("me", "n1", Forward)
	silent := dial(t, gate)
	writeAll(t, silent.conn, "lost\n")
	waitFor(t, "the request to be dropped", func() bool { return m.Link("me", "n1").Stats().Dropped[Forward] > 0 })
	mustStaySilent(t, silent.conn)
}

// A connection nobody can attribute goes through unfaulted, and is counted
// so that a run can tell when its cuts would not have held; so does a
// node's connection to itself, counted as its own.
func TestGateLetsTheUnattributedThrough(t *testing.T) {
	var who atomic.Value
	who.Store("")
	m := newTestMesh(t, func(net.Conn) (string, bool) { s := who.Load().(string); return s, s != "" })
	m.Cut("me", "n1")
	m.Cut("other", "n1")
	mustAsk(t, dial(t, m.GateAddr("n1")), "ping", "n1:ping")
	if c := m.Counts(); len(c) != 1 || c[""] != 1 {
		t.Fatalf("counts %v; want one unattributed", c)
	}
	who.Store("n1")
	mustAsk(t, dial(t, m.GateAddr("n1")), "ping", "n1:ping")
	if c := m.Counts(); c["n1"] != 1 || c[""] != 1 {
		t.Fatalf("counts %v; want one from n1 itself, one unattributed", c)
	}
}

func TestHTTPMeshPanicsOnUnknownIDs(t *testing.T) {
	m := newTestMesh(t, byPID)
	for _, fn := range []func(){
		func() { m.Cut("nobody", "n1") },
		func() { m.Cut("me", "n9") },
		func() { m.GateAddr("me") },
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Error("no panic on an unknown id")
				}
			}()
			fn()
		}()
	}
}
