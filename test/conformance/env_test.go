package conformance

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fencer-io/fencer/api/client"
	"github.com/fencer-io/fencer/test/testcluster"
)

// env is one client's cluster: three in-process members (real Raft over
// real TCP, testcluster.New), a proxy in front of each that the client is
// given instead of the member, and the harness's own Go client, which
// talks to the members directly and checks every outcome.
type env struct {
	spec    clientSpec
	argv    []string
	c       *testcluster.Cluster
	proxies []*Proxy
	hc      *client.Client
	seq     int
}

func newEnv(t *testing.T, spec clientSpec, argv []string) *env {
	t.Helper()
	c := testcluster.New(t, 3)
	c.WaitReady(20 * time.Second)
	e := &env{spec: spec, argv: argv, c: c}
	var members []string
	for _, n := range c.Nodes {
		p, err := NewProxy(n.HTTPAddr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(p.Close)
		e.proxies = append(e.proxies, p)
		members = append(members, n.HTTPAddr)
	}
	rewrite := map[string]string{}
	for i, n := range c.Nodes {
		rewrite[n.HTTPAddr] = e.proxies[i].Addr()
	}
	for _, p := range e.proxies {
		if err := p.Rewrite(rewrite); err != nil {
			t.Fatal(err)
		}
	}
	hc, err := client.New(members)
	if err != nil {
		t.Fatal(err)
	}
	e.hc = hc
	return e
}

// heal undoes a scenario's faults: every proxy passes traffic again and
// every stopped member runs, with a ready leader.
func (e *env) heal(t *testing.T) {
	t.Helper()
	for _, p := range e.proxies {
		p.Alive()
	}
	for _, n := range e.c.Nodes {
		if n.Inst == nil {
			e.c.Restart(n)
		}
	}
	e.c.WaitLeader(30 * time.Second)
	e.c.WaitReady(30 * time.Second)
}

// addrs is FENCER_ADDRS: the proxies, in the members' order.
func (e *env) addrs() string {
	var a []string
	for _, p := range e.proxies {
		a = append(a, p.Addr())
	}
	return strings.Join(a, ",")
}

// agent starts a fresh agent for this scenario; it is closed when the
// scenario ends, and its stderr shown if the scenario failed.
func (e *env) agent(t *testing.T) *agentProc {
	t.Helper()
	a, err := startAgent(e.argv, e.addrs())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := a.close(); err != nil {
			t.Error(err)
		}
		if t.Failed() {
			t.Logf("agent stderr:\n%s", a.stderr.String())
		}
	})
	return a
}

// name returns a lock name (or key) of its own for this scenario.
func (e *env) name(t *testing.T, what string) string {
	e.seq++
	sc := filepath.Base(t.Name())
	return fmt.Sprintf("conf.%s.%s.%s.%d", e.spec.name, sc, what, e.seq)
}

// ctx bounds one of the harness's own calls.
func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return c
}

// poll calls cond until it is true or timeout passes.
func poll(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	testcluster.Poll(t, timeout, what, cond)
}

// argv returns how to run spec's agent: the Go agent is built into the
// test's temp dir; the others are their wrapper scripts.
func (spec clientSpec) argv(t *testing.T, root string) []string {
	t.Helper()
	if spec.wrapper != "" {
		return []string{filepath.Join(root, spec.wrapper)}
	}
	bin := filepath.Join(t.TempDir(), "goagent")
	if out, err := exec.Command("go", "build", "-o", bin, "./goagent").CombinedOutput(); err != nil {
		t.Fatalf("go build ./goagent: %v\n%s", err, out)
	}
	return []string{bin}
}

// probe starts spec's agent once against no cluster to learn whether its
// client is built (a wrapper exiting 3 is not): a skip, or a failure when
// FENCER_REQUIRE_CLIENTS=1.
func probe(t *testing.T, argv []string) {
	t.Helper()
	a, err := startAgent(argv, "127.0.0.1:1")
	switch {
	case errors.Is(err, errNotBuilt) && os.Getenv("FENCER_REQUIRE_CLIENTS") != "1":
		t.Skip(err)
	case err != nil:
		t.Fatal(err)
	}
	if err := a.close(); err != nil {
		t.Fatal(err)
	}
}
