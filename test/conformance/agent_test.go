package conformance

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// errNotBuilt: the wrapper exited 3, its client is not built.
var errNotBuilt = errors.New("client not built")

// agentProc is one running agent: requests go to its stdin, and a reader
// goroutine sorts its stdout into answers (by id) and events.
type agentProc struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stderr *syncBuffer
	ready  map[string]any

	mu        sync.Mutex
	nextID    int64
	pending   map[int64]chan answer
	events    []event
	changed   chan struct{} // closed and replaced on every event
	violation string        // the first line that broke the protocol
	exited    chan struct{}
	exitCode  int
}

// answer is an agent's answer to one request.
type answer struct {
	ID     int64           `json:"id"`
	OK     bool            `json:"ok"`
	Result json.RawMessage `json:"result"`
	Error  *agentError     `json:"error"`
}

type agentError struct {
	Code    string `json:"code"`
	Class   string `json:"class"`
	Message string `json:"message"`
}

// event is an unsolicited line; At is when the harness read it.
type event struct {
	Event  string `json:"event"`
	Handle string `json:"handle"`
	Code   string `json:"code"`
	Class  string `json:"class"`
	Watch  string `json:"watch"`
	Index  uint64 `json:"index"`
	Type   string `json:"type"`
	Key    string `json:"key"`
	Name   string `json:"name"`
	Token  uint64 `json:"token"`
	At     time.Time
}

// syncBuffer is a bytes.Buffer safe for the exec's copier and the test.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// readyTimeout is generous: a JVM on a loaded 2-core machine starts slowly.
const readyTimeout = 60 * time.Second

// startAgent runs argv with FENCER_ADDRS=addrs in a process group of its
// own (so a signal reaches the agent behind a wrapper script) and waits for
// its ready line. A wrapper that exits 3 is errNotBuilt.
func startAgent(argv []string, addrs string) (*agentProc, error) {
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), "FENCER_ADDRS="+addrs)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	a := &agentProc{cmd: cmd, stderr: &syncBuffer{}, pending: map[int64]chan answer{}, changed: make(chan struct{}), exited: make(chan struct{})}
	cmd.Stderr = a.stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	a.stdin = stdin
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	ready := make(chan map[string]any, 1)
	go a.read(stdout, ready)
	select {
	case r := <-ready:
		a.ready = r
		return a, nil
	case <-a.exited:
		if a.exitCode == 3 {
			return nil, fmt.Errorf("%w: %s", errNotBuilt, strings.TrimSpace(a.stderr.String()))
		}
		return nil, fmt.Errorf("agent exited %d before ready; stderr:\n%s", a.exitCode, a.stderr.String())
	case <-time.After(readyTimeout):
		a.kill()
		return nil, fmt.Errorf("agent not ready after %v; stderr:\n%s", readyTimeout, a.stderr.String())
	}
}

// read demultiplexes stdout until it closes, then reaps the process.
func (a *agentProc) read(stdout io.Reader, ready chan<- map[string]any) {
	sc := bufio.NewScanner(stdout)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		at := time.Now()
		line := sc.Bytes()
		var probe map[string]any
		if err := json.Unmarshal(line, &probe); err != nil {
			a.violate(fmt.Sprintf("not a JSON object: %q", line))
			continue
		}
		if _, ok := probe["id"]; ok {
			var ans answer
			if err := json.Unmarshal(line, &ans); err != nil || ans.ID <= 0 {
				a.violate(fmt.Sprintf("bad answer: %q", line))
				continue
			}
			a.mu.Lock()
			ch, ok := a.pending[ans.ID]
			delete(a.pending, ans.ID)
			a.mu.Unlock()
			if !ok {
				a.violate(fmt.Sprintf("answer to no pending request (or a second one): %q", line))
				continue
			}
			ch <- ans
			continue
		}
		var ev event
		if err := json.Unmarshal(line, &ev); err != nil || ev.Event == "" {
			a.violate(fmt.Sprintf("neither an answer nor an event: %q", line))
			continue
		}
		if ev.Event == "ready" {
			ready <- probe
			continue
		}
		ev.At = at
		a.mu.Lock()
		a.events = append(a.events, ev)
		close(a.changed)
		a.changed = make(chan struct{})
		a.mu.Unlock()
	}
	err := a.cmd.Wait()
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		a.exitCode = exit.ExitCode()
	case err != nil:
		a.exitCode = -1
	}
	close(a.exited)
}

func (a *agentProc) violate(what string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.violation == "" {
		a.violation = what
	}
}

// call is a request in flight.
type call struct {
	op     string
	sentAt time.Time
	ch     chan answer
	a      *agentProc
}

// send writes a request and returns at once: the harness may send the next
// before this one is answered.
func (a *agentProc) send(t testing.TB, op string, args map[string]any) *call {
	t.Helper()
	a.mu.Lock()
	a.nextID++
	id := a.nextID
	ch := make(chan answer, 1)
	a.pending[id] = ch
	a.mu.Unlock()
	line, err := json.Marshal(map[string]any{"id": id, "op": op, "args": args})
	if err != nil {
		t.Fatal(err)
	}
	c := &call{op: op, ch: ch, a: a, sentAt: time.Now()}
	if _, err := a.stdin.Write(append(line, '\n')); err != nil {
		t.Fatalf("%s: writing to the agent: %v", op, err)
	}
	return c
}

// wait waits up to timeout for the answer.
func (c *call) wait(t testing.TB, timeout time.Duration) answer {
	t.Helper()
	select {
	case ans := <-c.ch:
		return ans
	case <-c.a.exited:
		t.Fatalf("%s: the agent exited %d before answering", c.op, c.a.exitCode)
	case <-time.After(timeout):
		t.Fatalf("%s: no answer after %v", c.op, timeout)
	}
	return answer{}
}

// answerTimeout bounds an op that does not wait; generous for a loaded
// machine and a client retrying through a failover.
const answerTimeout = 60 * time.Second

// ok runs op and fails unless it succeeds; it returns the result.
func (a *agentProc) ok(t testing.TB, op string, args map[string]any) result {
	t.Helper()
	return a.send(t, op, args).ok(t)
}

func (c *call) ok(t testing.TB) result {
	t.Helper()
	ans := c.wait(t, answerTimeout)
	if !ans.OK {
		t.Fatalf("%s: want success, got %+v", c.op, ans.Error)
	}
	var r result
	if err := json.Unmarshal(ans.Result, &r); err != nil {
		t.Fatalf("%s: result %s: %v", c.op, ans.Result, err)
	}
	return r
}

// fail runs op and fails unless it is refused; it returns the error.
func (a *agentProc) fail(t testing.TB, op string, args map[string]any) agentError {
	t.Helper()
	ans := a.send(t, op, args).wait(t, answerTimeout)
	if ans.OK || ans.Error == nil {
		t.Fatalf("%s %v: want an error, got success %s", op, args, ans.Result)
	}
	return *ans.Error
}

// result is an answer's result object.
type result map[string]any

func (r result) u64(t testing.TB, k string) uint64 {
	t.Helper()
	v, ok := r[k].(float64)
	if !ok || v < 0 {
		t.Fatalf("result %v: %q is not a non-negative number", r, k)
	}
	return uint64(v)
}

func (r result) str(t testing.TB, k string) string {
	t.Helper()
	v, ok := r[k].(string)
	if !ok {
		t.Fatalf("result %v: %q is not a string", r, k)
	}
	return v
}

func (r result) boolean(t testing.TB, k string) bool {
	t.Helper()
	v, ok := r[k].(bool)
	if !ok {
		t.Fatalf("result %v: %q is not a bool", r, k)
	}
	return v
}

// waitEvent waits up to timeout for an event matching match.
func (a *agentProc) waitEvent(t testing.TB, timeout time.Duration, what string, match func(event) bool) event {
	t.Helper()
	deadline := time.After(timeout)
	for {
		a.mu.Lock()
		for _, ev := range a.events {
			if match(ev) {
				a.mu.Unlock()
				return ev
			}
		}
		changed := a.changed
		a.mu.Unlock()
		select {
		case <-changed:
		case <-deadline:
			t.Fatalf("no %s after %v (events: %+v)", what, timeout, a.snapshot(func(event) bool { return true }))
		}
	}
}

// snapshot returns the events so far that match.
func (a *agentProc) snapshot(match func(event) bool) []event {
	a.mu.Lock()
	defer a.mu.Unlock()
	var out []event
	for _, ev := range a.events {
		if match(ev) {
			out = append(out, ev)
		}
	}
	return out
}

func lostOf(handle string) func(event) bool {
	return func(ev event) bool { return ev.Event == "lost" && ev.Handle == handle }
}

// signal sends sig to the agent's process group.
func (a *agentProc) signal(sig syscall.Signal) error {
	return syscall.Kill(-a.cmd.Process.Pid, sig)
}

func (a *agentProc) kill() {
	a.signal(syscall.SIGKILL)
	<-a.exited
}

// close ends the agent as the protocol says (stdin closed: exit 0 within
// 2 s), killing it if it does not, and reports what went wrong.
func (a *agentProc) close() error {
	a.signal(syscall.SIGCONT) // a paused agent cannot exit
	a.stdin.Close()
	select {
	case <-a.exited:
	case <-time.After(2 * time.Second):
		a.kill()
		return errors.New("the agent did not exit within 2 s of its stdin closing")
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.violation != "" {
		return errors.New("the agent broke the protocol: " + a.violation)
	}
	return nil
}
