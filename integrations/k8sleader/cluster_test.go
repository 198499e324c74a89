package k8sleader_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// fencerBin is the fencer binary the test runs: $FENCER_BIN, or the one
// make build leaves in the checkout (make test builds it first).
func fencerBin(t *testing.T) string {
	t.Helper()
	bin := os.Getenv("FENCER_BIN")
	if bin == "" {
		bin = "../../bin/fencer"
	}
	abs, err := filepath.Abs(bin)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(abs); err != nil {
		t.Fatalf("no fencer binary (%v): run make build, or set FENCER_BIN", err)
	}
	return abs
}

// proc is a child process the test started; the test ends it by its pid.
type proc struct {
	name  string
	cmd   *exec.Cmd
	stdin io.WriteCloser
	log   string
	done  chan struct{}
}

// start starts path with args, its stderr (and stdout unless lines is set)
// to a log file in dir, and registers a cleanup that kills it if it is
// still running. A parent-death signal ends it if the test binary dies
// before its cleanups run.
func start(t *testing.T, dir, name string, env []string, lines func([]byte), path string, args ...string) *proc {
	t.Helper()
	p := &proc{name: name, log: filepath.Join(dir, name+".log"), done: make(chan struct{})}
	logf, err := os.Create(p.log)
	if err != nil {
		t.Fatal(err)
	}
	p.cmd = exec.Command(path, args...)
	p.cmd.Env = append(os.Environ(), env...)
	p.cmd.Stderr = logf
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	var stdout io.ReadCloser
	if lines != nil {
		if stdout, err = p.cmd.StdoutPipe(); err != nil {
			t.Fatal(err)
		}
		if p.stdin, err = p.cmd.StdinPipe(); err != nil {
			t.Fatal(err)
		}
	} else {
		p.cmd.Stdout = logf
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		if stdout != nil {
			sc := bufio.NewScanner(stdout)
			for sc.Scan() {
				lines(sc.Bytes())
			}
		}
		p.cmd.Wait()
		logf.Close()
		close(p.done)
	}()
	t.Cleanup(func() {
		// A stopped process must be continued to die of SIGKILL's reaping.
		p.cmd.Process.Signal(syscall.SIGCONT)
		p.cmd.Process.Kill()
		<-p.done
		if t.Failed() {
			if b, err := os.ReadFile(p.log); err == nil {
				t.Logf("--- %s log (last 3000 bytes):\n%s", name, tail(b, 3000))
			}
		}
	})
	return p
}

func tail(b []byte, n int) []byte {
	if len(b) > n {
		return b[len(b)-n:]
	}
	return b
}

func (p *proc) signal(t *testing.T, sig syscall.Signal) {
	t.Helper()
	if err := p.cmd.Process.Signal(sig); err != nil {
		t.Fatalf("%s: %v: %v", p.name, sig, err)
	}
}

var (
	portMu    sync.Mutex
	portsUsed = map[int]bool{}
)

// freeAddr returns a loopback address nothing listens on now, on a port
// this test binary has not handed out before, below the kernel's
// ephemeral range (32768 and up here): a port from that range could be
// taken by one of the electors' outgoing connections before the member
// that was given it listens (test/chaos/harness does the same).
func freeAddr(t *testing.T) string {
	t.Helper()
	portMu.Lock()
	defer portMu.Unlock()
	for range 1000 {
		p := 20000 + rand.IntN(12000)
		if portsUsed[p] {
			continue
		}
		addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(p))
		l, err := net.Listen("tcp", addr)
		if err != nil {
			continue
		}
		l.Close()
		portsUsed[p] = true
		return addr
	}
	t.Fatal("no free port in 20000..32000")
	return ""
}

// poll waits until cond holds, failing the test after timeout.
func poll(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func httpOK(url string) bool {
	resp, err := http.Get(url)
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// startFencer starts n `fencer serve` members together and the example
// fenced resource (`fencer resource serve`), all on loopback, and waits
// until every member is ready. It returns the members' HTTP addresses and
// the resource's base URL.
func startFencer(t *testing.T, n int) (endpoints []string, resource string) {
	t.Helper()
	bin, dir := fencerBin(t), t.TempDir()
	raft := make([]string, n)
	var peers []string
	for i := range n {
		endpoints = append(endpoints, freeAddr(t))
		raft[i] = freeAddr(t)
		peers = append(peers, fmt.Sprintf("n%d=%s@%s", i+1, raft[i], endpoints[i]))
	}
	for i := range n {
		id := fmt.Sprintf("n%d", i+1)
		start(t, dir, id, nil, nil, bin, "serve", "--id", id, "--data-dir", filepath.Join(dir, id),
			"--http-addr", endpoints[i], "--raft-addr", raft[i], "--initial-cluster", strings.Join(peers, ","))
	}
	addr := freeAddr(t)
	start(t, dir, "resource", nil, nil, bin, "resource", "serve", "--data-dir", filepath.Join(dir, "resource"), "--addr", addr)
	resource = "http://" + addr
	poll(t, 30*time.Second, "every fencer member ready and the resource up", func() bool {
		for _, e := range endpoints {
			if !httpOK("http://" + e + "/readyz") {
				return false
			}
		}
		return httpOK(resource + "/healthz")
	})
	return endpoints, resource
}

// electors runs elector processes and collects their events in the order
// the test receives them.
type electors struct {
	t   *testing.T
	dir string
	cfg electorConfig

	mu     sync.Mutex
	events []event
	procs  map[string]*proc
}

func (es *electors) start(id string) *proc {
	es.t.Helper()
	return es.startWith(id, es.cfg)
}

// startWith starts elector id with cfg.
func (es *electors) startWith(id string, cfg electorConfig) *proc {
	es.t.Helper()
	cfg.Identity = id
	raw, err := json.Marshal(cfg)
	if err != nil {
		es.t.Fatal(err)
	}
	self, err := os.Executable()
	if err != nil {
		es.t.Fatal(err)
	}
	p := start(es.t, es.dir, id, []string{electorEnv + "=" + string(raw)}, func(line []byte) {
		var e event
		if err := json.Unmarshal(line, &e); err != nil {
			es.t.Errorf("%s printed %q: %v", id, line, err)
			return
		}
		es.mu.Lock()
		es.events = append(es.events, e)
		es.mu.Unlock()
	}, self)
	es.mu.Lock()
	es.procs[id] = p
	es.mu.Unlock()
	return p
}

// seen returns the events so far.
func (es *electors) seen() []event {
	es.mu.Lock()
	defer es.mu.Unlock()
	return append([]event(nil), es.events...)
}

// find returns the first event at or after index from that matches.
func (es *electors) find(from int, match func(event) bool) (event, int, bool) {
	evs := es.seen()
	for i := from; i < len(evs); i++ {
		if match(evs[i]) {
			return evs[i], i, true
		}
	}
	return event{}, len(evs), false
}

// wait polls until an event at or after from matches, and returns it and
// its index.
func (es *electors) wait(timeout time.Duration, from int, what string, match func(event) bool) (event, int) {
	es.t.Helper()
	var got event
	var at int
	poll(es.t, timeout, what, func() bool {
		var ok bool
		got, at, ok = es.find(from, match)
		return ok
	})
	return got, at
}
