// Command goagent is the Go client's conformance agent (PROTOCOL.md): it
// reads one JSON request a line on stdin, runs each on its own goroutine
// through api/client's public API only, and writes answers and events on
// stdout, one JSON object a line.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"

	"github.com/fencer-io/fencer/api/client"
)

func main() {
	addrs := strings.Split(os.Getenv("FENCER_ADDRS"), ",")
	// The client's own log goes to stderr, which the harness shows when a
	// scenario fails.
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	c, err := client.New(addrs, client.WithLogger(log))
	if err != nil {
		fmt.Fprintln(os.Stderr, "goagent:", err)
		os.Exit(2)
	}
	a := &agent{c: c, out: json.NewEncoder(os.Stdout), handles: map[string]*held{}, sessions: map[string]*client.Session{}, watches: map[string]context.CancelFunc{}}
	a.emit(map[string]any{"event": "ready", "client": "go", "version": "dev"})
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(make([]byte, 1<<20), 1<<20)
	// Stdin closed: exit at once, abandoning what runs (PROTOCOL.md: the
	// harness decides what is released).
	for in.Scan() {
		var r request
		if err := json.Unmarshal(in.Bytes(), &r); err != nil {
			fmt.Fprintf(os.Stderr, "goagent: bad request line %q: %v\n", in.Text(), err)
			continue
		}
		if r.Op == "exit" {
			a.answer(r.ID, map[string]any{}, nil)
			return
		}
		go func() {
			res, err := a.run(r)
			a.answer(r.ID, res, err)
		}()
	}
}

// request is one line from the harness.
type request struct {
	ID   int64           `json:"id"`
	Op   string          `json:"op"`
	Args json.RawMessage `json:"args"`
}

// agent holds the client and what the harness has named: grants, sessions
// and watches by handle.
type agent struct {
	c *client.Client

	outMu sync.Mutex
	out   *json.Encoder

	mu       sync.Mutex
	next     int
	handles  map[string]*held
	sessions map[string]*client.Session
	watches  map[string]context.CancelFunc
}

// held is one grant the agent holds: a lease (lock, permit, campaign) or a
// multi-lock. ended is set when the harness released it or closed its
// session, so that no lost event is printed for it.
type held struct {
	lease *client.Lease
	multi *client.MultiLock
	ended bool
}

func (h *held) done() <-chan struct{} {
	if h.multi != nil {
		return h.multi.Done()
	}
	return h.lease.Done()
}

func (h *held) err() error {
	if h.multi != nil {
		return h.multi.Err()
	}
	return h.lease.Err()
}

func (h *held) token() uint64 {
	if h.multi != nil {
		return h.multi.Token()
	}
	return h.lease.Token()
}

func (a *agent) emit(v any) {
	a.outMu.Lock()
	defer a.outMu.Unlock()
	if err := a.out.Encode(v); err != nil {
		fmt.Fprintln(os.Stderr, "goagent: stdout:", err)
		os.Exit(2)
	}
}

func (a *agent) answer(id int64, res any, err error) {
	if err != nil {
		code, class := classify(err)
		a.emit(map[string]any{"id": id, "ok": false, "error": map[string]string{"code": code, "class": class, "message": err.Error()}})
		return
	}
	a.emit(map[string]any{"id": id, "ok": true, "result": res})
}

// name makes a handle with prefix p (h, s, w).
func (a *agent) name(p string) string {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.next++
	return fmt.Sprintf("%s%d", p, a.next)
}

// hold names h and prints its lost event when it ends while held.
func (a *agent) hold(h *held) string {
	handle := a.name("h")
	a.mu.Lock()
	a.handles[handle] = h
	a.mu.Unlock()
	go func() {
		<-h.done()
		a.mu.Lock()
		ended := h.ended
		a.mu.Unlock()
		if err := h.err(); !ended && err != nil {
			code, class := classify(err)
			a.emit(map[string]any{"event": "lost", "handle": handle, "code": code, "class": class})
		}
	}()
	return handle
}

func (a *agent) handle(name string) (*held, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	h, ok := a.handles[name]
	if !ok {
		return nil, fmt.Errorf("%w: no handle %q", errHarness, name)
	}
	return h, nil
}

func (a *agent) session(name string) (*client.Session, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	s, ok := a.sessions[name]
	if !ok {
		return nil, fmt.Errorf("%w: no session %q", errHarness, name)
	}
	return s, nil
}

// endQuietly marks handles as ended by the harness's own request.
func (a *agent) endQuietly(hs ...*held) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, h := range hs {
		h.ended = true
	}
}

// underSession returns the handles held under s.
func (a *agent) underSession(s *client.Session) []*held {
	a.mu.Lock()
	defer a.mu.Unlock()
	var out []*held
	for _, h := range a.handles {
		if h.lease != nil && h.lease.Session() == s {
			out = append(out, h)
		}
	}
	return out
}
