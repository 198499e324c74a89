package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fencer-io/fencer/internal/acl"
	"github.com/fencer-io/fencer/internal/bench/load"
	"github.com/fencer-io/fencer/internal/server"
	tc "github.com/fencer-io/fencer/test/testcluster"
)

func TestBenchRejectsBadFlags(t *testing.T) {
	for _, args := range [][]string{
		{"bench", "-w", "nope"},
		{"bench", "-w", ","},
		{"bench", "-c", "0"},
		{"bench", "-d", "0s"},
		{"bench", "--ttl", "10ms"},
		{"bench", "--wait", "2m"},
		{"bench", "--rate", "-1"},
		{"bench", "-o", "yaml"},
	} {
		if _, _, err := fencer(t, "", args...); err == nil {
			t.Errorf("%v: want an error", args)
		}
	}
}

func TestBenchRunsEveryWorkload(t *testing.T) {
	newTestCluster(t)
	// --ops ends each run after a fixed number of operations, so the test
	// does not depend on how fast the machine is.
	out, _, err := fencer(t, "", "bench", "-w", "uncontended,contended,renew,fenced-write,hold",
		"-c", "3", "--ops", "12", "-d", "1m", "--warmup", "0s", "-o", "json")
	if err != nil {
		t.Fatal(err)
	}
	var results []load.Result
	if err := json.Unmarshal([]byte(out), &results); err != nil {
		t.Fatalf("%v in %s", err, out)
	}
	if len(results) != 5 {
		t.Fatalf("%d results, want 5: %s", len(results), out)
	}
	for _, r := range results {
		if r.System != "fencer" || r.Clients != 3 || r.Ops != 12 || r.Errors != 0 {
			t.Errorf("%s: %+v, want 12 ops by 3 clients and no errors", r.Workload, r)
		}
	}

	text, _, err := fencer(t, "", "bench", "-w", "uncontended", "-c", "2", "--ops", "4", "-d", "1m", "--warmup", "0s")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(text, "uncontended") || !strings.Contains(text, "ops=4 errors=0") {
		t.Errorf("text output: %q", text)
	}
}

// fencer bench speaks with the credentials the other commands take: against
// a cluster with an ACL it is refused without a token and runs with
// FENCER_AUTH_TOKEN or --auth-token-file (issue 26 F12: it accepted both and
// sent neither). Fails with NewFencer given no security options.
func TestBenchHonoursTheAuthFlags(t *testing.T) {
	const secret = "bench-secret-0123456789"
	store := acl.NewStore(mustParseACL(t, `{"tokens":[{"name":"bench","secret":"`+secret+`","role":"client","keys":["*"]}]}`))
	// One member: members of a cluster with an ACL need a credential of
	// their own to join, which is not what this test is about.
	c := tc.New(t, 1, tc.Options{Server: func(string) server.Options { return server.Options{ACL: store} }})
	var eps []string
	for _, n := range c.Nodes {
		eps = append(eps, n.HTTPAddr)
	}
	t.Setenv("FENCER_ENDPOINTS", strings.Join(eps, ","))
	args := []string{"bench", "-w", "uncontended,fenced-write", "-c", "2", "--ops", "4", "-d", "1m", "--warmup", "0s", "-o", "json", "--timeout", "2s"}
	if out, _, err := fencer(t, "", args...); err == nil {
		t.Fatalf("bench without a token against an ACL ran: %s", out)
	}
	tokenFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokenFile, []byte(secret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, extra := range [][]string{{"--auth-token-file", tokenFile}, nil} {
		if extra == nil {
			t.Setenv("FENCER_AUTH_TOKEN", secret)
		}
		out, _, err := fencer(t, "", append(args, extra...)...)
		if err != nil {
			t.Fatalf("bench %v: %v", extra, err)
		}
		var results []load.Result
		if err := json.Unmarshal([]byte(out), &results); err != nil || len(results) != 2 {
			t.Fatalf("bench %v: %v in %s", extra, err, out)
		}
		for _, r := range results {
			if r.Ops != 4 || r.Errors != 0 {
				t.Fatalf("bench %v, %s: %+v", extra, r.Workload, r)
			}
		}
	}
}

func mustParseACL(t *testing.T, s string) *acl.ACL {
	t.Helper()
	a, err := acl.Parse([]byte(s))
	if err != nil {
		t.Fatal(err)
	}
	return a
}
