// Package testcluster starts real fencer clusters for tests: in the test
// process (real Raft over TCP on 127.0.0.1:0, real log stores, bolt or wal,
// in temp dirs, and each node's HTTP API), or as a fencer dev child process
// (devprocess.go). Helpers poll with deadlines; none sleeps to wait for a
// state.
package testcluster

import (
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fencer-io/fencer/cluster"
	"github.com/fencer-io/fencer/cluster/logstore"
	"github.com/fencer-io/fencer/internal/server"
)

// Cluster is a set of in-process nodes.
type Cluster struct {
	t     testing.TB
	dir   string
	opts  Options
	Nodes []*Node
}

// Node is one member; Inst is nil while it is stopped.
type Node struct {
	ID       string
	DataDir  string
	RaftAddr string
	HTTPAddr string
	Inst     *server.Instance
	cfg      cluster.Config
	// crashed is the instance Crash set aside, until it can be stopped.
	crashed *server.Instance
}

// Options tune a test cluster.
type Options struct {
	// Configure may change each node's config before it starts.
	Configure func(*cluster.Config)
	// Server gives each node's HTTP options (TLS, ACL, limits).
	Server func(id string) server.Options
	// LogStore is every node's log store kind, nodes added later included
	// (default bolt).
	LogStore logstore.Kind
}

// Raft timings for loopback tests: faster than production, yet generous
// enough that a loaded 2-core machine running several test packages at once
// does not depose leaders by accident.
func fastConfig(cfg *cluster.Config) {
	cfg.HeartbeatTimeout = time.Second
	cfg.ElectionTimeout = time.Second
	cfg.LeaderLeaseTimeout = 500 * time.Millisecond
	cfg.ApplyTimeout = 5 * time.Second
}

// Logger returns a logger that writes to the test log when FENCER_TEST_LOG
// is set, and discards otherwise.
func Logger(t testing.TB) *slog.Logger {
	if os.Getenv("FENCER_TEST_LOG") == "" {
		return slog.New(slog.DiscardHandler)
	}
	return slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// New starts an n-node cluster: n1 bootstraps, the others join through it.
// It waits until every node is a registered member and the cluster has a
// ready leader. Everything is stopped when the test ends.
func New(t testing.TB, n int, opts ...Options) *Cluster {
	t.Helper()
	var o Options
	if len(opts) > 0 {
		o = opts[0]
	}
	c := &Cluster{t: t, dir: t.TempDir(), opts: o}
	t.Cleanup(c.Close)
	for i := range n {
		cfg := cluster.Config{
			ID:       fmt.Sprintf("n%d", i+1),
			DataDir:  filepath.Join(c.dir, fmt.Sprintf("n%d", i+1)),
			RaftAddr: "127.0.0.1:0",
			Logger:   Logger(t),
		}
		fastConfig(&cfg)
		cfg.LogStore = o.LogStore
		if i == 0 {
			cfg.Bootstrap = true
		} else {
			cfg.Join = []string{c.Nodes[0].HTTPAddr}
		}
		if o.Configure != nil {
			o.Configure(&cfg)
		}
		c.Nodes = append(c.Nodes, c.start(cfg, "127.0.0.1:0"))
		if i == 0 {
			c.WaitLeader(10 * time.Second)
		}
	}
	c.WaitMembers(n, 20*time.Second)
	return c
}

func (c *Cluster) start(cfg cluster.Config, httpAddr string) *Node {
	c.t.Helper()
	cfg.HTTPAddr = ""
	in, err := server.Start(cfg, httpAddr, c.serverOptions(cfg.ID))
	if err != nil {
		c.t.Fatalf("start %s: %v", cfg.ID, err)
	}
	cfg.HTTPAddr = in.Addr()
	return &Node{ID: cfg.ID, DataDir: cfg.DataDir, RaftAddr: in.Node.RaftAddr(), HTTPAddr: in.Addr(), Inst: in, cfg: cfg}
}

// Add starts a new node that joins through the current members.
func (c *Cluster) Add(id string, mod ...func(*cluster.Config)) *Node {
	c.t.Helper()
	n, err := c.TryAdd(id, mod...)
	if err != nil {
		c.t.Fatalf("add %s: %v", id, err)
	}
	return n
}

// TryAdd is Add that returns the start error (a refused join) instead of
// failing the test.
func (c *Cluster) TryAdd(id string, mod ...func(*cluster.Config)) (*Node, error) {
	cfg := cluster.Config{
		ID:       id,
		DataDir:  filepath.Join(c.dir, id),
		RaftAddr: "127.0.0.1:0",
		Logger:   Logger(c.t),
	}
	fastConfig(&cfg)
	cfg.LogStore = c.opts.LogStore
	cfg.JoinTimeout = 30 * time.Second
	for _, r := range c.Running() {
		cfg.Join = append(cfg.Join, r.HTTPAddr)
	}
	for _, m := range mod {
		m(&cfg)
	}
	in, err := server.Start(cfg, "127.0.0.1:0", c.serverOptions(cfg.ID))
	if err != nil {
		return nil, err
	}
	cfg.HTTPAddr = in.Addr()
	n := &Node{ID: cfg.ID, DataDir: cfg.DataDir, RaftAddr: in.Node.RaftAddr(), HTTPAddr: in.Addr(), Inst: in, cfg: cfg}
	c.Nodes = append(c.Nodes, n)
	return n, nil
}

func (c *Cluster) serverOptions(id string) server.Options {
	if c.opts.Server == nil {
		return server.Options{}
	}
	return c.opts.Server(id)
}

// Dir returns the directory holding the nodes' data dirs.
func (c *Cluster) Dir() string { return c.dir }

// Forget drops a node from the harness (after it was removed and stopped).
func (c *Cluster) Forget(n *Node) {
	for i, m := range c.Nodes {
		if m == n {
			c.Nodes = append(c.Nodes[:i], c.Nodes[i+1:]...)
			return
		}
	}
}

// Close stops every running node, and those set aside by Crash.
func (c *Cluster) Close() {
	for _, n := range c.Nodes {
		if n.Inst != nil {
			n.Inst.Close()
			n.Inst = nil
		}
		n.reap()
	}
}

// Crash stands for the exit of n's process after a fatal error: its HTTP
// server closes at once and the node is no longer running, but its
// instance is only set aside. A node whose disk hangs cannot stop Raft
// until a write returns, so Restart and Close stop it then: heal its disk
// first.
func (c *Cluster) Crash(n *Node) {
	n.Inst.HTTP.Close()
	n.crashed, n.Inst = n.Inst, nil
	http.DefaultClient.CloseIdleConnections()
}

// reap stops an instance that Crash set aside.
func (n *Node) reap() {
	if n.crashed != nil {
		n.crashed.Close()
		n.crashed = nil
	}
}

// Stop shuts a node down cleanly, keeping its data dir.
func (c *Cluster) Stop(n *Node) {
	if n.Inst != nil {
		n.Inst.Close()
		n.Inst = nil
	}
	// A kept-alive connection to the stopped server must not be reused
	// for a request to the node started next on the same address (a POST
	// on a connection the old server closed fails with EOF).
	http.DefaultClient.CloseIdleConnections()
}

// StopGracefully stops a node as SIGTERM stops fencer serve: a leader hands
// its leadership over first (server.Instance.Stop).
func (c *Cluster) StopGracefully(n *Node) {
	if n.Inst != nil {
		n.Inst.Stop()
		n.Inst = nil
	}
	http.DefaultClient.CloseIdleConnections()
}

// Restart starts a stopped node again on the same data dir and addresses,
// its configuration changed by mod (which later restarts keep).
func (c *Cluster) Restart(n *Node, mod ...func(*cluster.Config)) {
	c.t.Helper()
	n.reap()
	for _, m := range mod {
		m(&n.cfg)
	}
	cfg := n.cfg
	cfg.RaftAddr = n.RaftAddr
	cfg.Bootstrap, cfg.Join = false, nil
	deadline := time.Now().Add(10 * time.Second)
	for {
		in, err := server.Start(cfg, n.HTTPAddr, c.serverOptions(cfg.ID))
		if err == nil {
			n.Inst = in
			return
		}
		// The old sockets may linger for a moment after a close.
		if time.Now().After(deadline) {
			c.t.Fatalf("restart %s: %v", n.ID, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Running returns the nodes that are up.
func (c *Cluster) Running() []*Node {
	var out []*Node
	for _, n := range c.Nodes {
		if n.Inst != nil {
			out = append(out, n)
		}
	}
	return out
}

// Leader returns the running node that leads and is ready, or nil.
func (c *Cluster) Leader() *Node {
	for _, n := range c.Running() {
		if n.Inst.Node.IsLeader() {
			return n
		}
	}
	return nil
}

// WaitLeader polls until a running node leads and is ready.
func (c *Cluster) WaitLeader(timeout time.Duration) *Node {
	c.t.Helper()
	return c.waitLeader(timeout, "")
}

// WaitNewLeader polls until a ready leader other than old exists.
func (c *Cluster) WaitNewLeader(old string, timeout time.Duration) *Node {
	c.t.Helper()
	return c.waitLeader(timeout, old)
}

func (c *Cluster) waitLeader(timeout time.Duration, not string) *Node {
	c.t.Helper()
	var l *Node
	Poll(c.t, timeout, "a ready leader other than "+not, func() bool {
		l = c.Leader()
		return l != nil && l.ID != not
	})
	return l
}

// Other returns the last of the cluster's nodes that is none of not: a
// follower, given the leader.
func (c *Cluster) Other(not ...*Node) *Node {
	var other *Node
	for _, n := range c.Nodes {
		if !slices.Contains(not, n) {
			other = n
		}
	}
	return other
}

// WaitReady polls until every running node answers GET /readyz with 200,
// as a client would wait: from then on every primitive works on its first
// call (a new cluster's formats and grant-history settings are applied).
func (c *Cluster) WaitReady(timeout time.Duration) {
	c.t.Helper()
	Poll(c.t, timeout, "every running node ready (GET /readyz)", func() bool {
		var urls []string
		for _, n := range c.Running() {
			urls = append(urls, n.URL())
		}
		return AllReady(urls...)
	})
}

// AllReady reports whether every API at urls answers GET /readyz with 200
// now, as a client or a probe would ask.
func AllReady(urls ...string) bool {
	hc := &http.Client{Timeout: time.Second}
	for _, u := range urls {
		resp, err := hc.Get(u + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return false
		}
	}
	return true
}

// WaitMembers polls until the leader's configuration has n members with
// recorded HTTP addresses, and every running node knows the leader.
func (c *Cluster) WaitMembers(n int, timeout time.Duration) {
	c.t.Helper()
	Poll(c.t, timeout, fmt.Sprintf("%d registered members", n), func() bool {
		l := c.Leader()
		if l == nil {
			return false
		}
		st, err := l.Inst.Node.Status()
		if err != nil || len(st.Members) != n {
			return false
		}
		for _, m := range st.Members {
			if m.HTTPAddr == "" {
				return false
			}
		}
		for _, r := range c.Running() {
			if _, addr := r.Inst.Node.Leader(); addr == "" {
				return false
			}
		}
		return true
	})
}

// URL returns the base URL of a node's API.
func (n *Node) URL() string {
	if n.cfg.PeerTLSClient != nil {
		return "https://" + n.HTTPAddr
	}
	return "http://" + n.HTTPAddr
}

// Poll calls cond until it returns true or timeout passes, then fails.
func Poll(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// NewRequest builds a request with headers given as name, value pairs. A
// body goes as application/json unless headers set another Content-Type.
func NewRequest(t testing.TB, method, url string, body string, headers ...string) *http.Request {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	return req
}

// Do sends an HTTP request (see NewRequest) and returns status and body.
func Do(t testing.TB, method, url string, body string, headers ...string) (int, string, http.Header) {
	t.Helper()
	resp, err := http.DefaultClient.Do(NewRequest(t, method, url, body, headers...))
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), resp.Header
}
