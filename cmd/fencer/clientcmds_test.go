package main

import (
	"encoding/json"
	"errors"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/fencer-io/fencer/api/client"
	"github.com/fencer-io/fencer/api/wire"
	"github.com/fencer-io/fencer/cmd/fencer/internal/cli"
	"github.com/fencer-io/fencer/cmd/fencer/internal/clientcmd"
	tc "github.com/fencer-io/fencer/test/testcluster"
)

// newTestCluster starts a cluster and points the commands at it through
// $FENCER_ENDPOINTS, as a user's shell would.
func newTestCluster(t *testing.T) *tc.Cluster {
	t.Helper()
	c := tc.New(t, 3)
	var eps []string
	for _, n := range c.Nodes {
		eps = append(eps, n.HTTPAddr)
	}
	t.Setenv("FENCER_ENDPOINTS", strings.Join(eps, ","))
	return c
}

// fencer runs the command line in-process.
func fencer(t *testing.T, stdin string, args ...string) (string, string, error) {
	t.Helper()
	var out, errb tc.SyncBuffer
	root := newRootCmd(&out, &errb)
	root.SetIn(strings.NewReader(stdin))
	root.SetArgs(args)
	err := root.Execute()
	return out.String(), errb.String(), err
}

func mustFencer(t *testing.T, args ...string) string {
	t.Helper()
	out, stderr, err := fencer(t, "", args...)
	if err != nil {
		t.Fatalf("fencer %s: %v (stderr %q)", strings.Join(args, " "), err, stderr)
	}
	return out
}

var grantLine = regexp.MustCompile(`^token=(\d+) lease=([0-9a-f]{32}) ttl=(\S+)\n$`)

func TestLockAndKVCommands(t *testing.T) {
	newTestCluster(t)
	// Empty lists are [] under -o json, not null.
	for _, group := range []string{"lock", "sem"} {
		if out := mustFencer(t, group, "list", "-o", "json"); !regexp.MustCompile(`":\s*\[\]`).MatchString(out) {
			t.Fatalf("%s list of none: %q", group, out)
		}
	}
	out := mustFencer(t, "lock", "acquire", "job", "--ttl", "30s", "--holder", "cli-test")
	m := grantLine.FindStringSubmatch(out)
	if m == nil || m[3] != "30s" {
		t.Fatalf("acquire output %q", out)
	}
	token, lease := m[1], m[2]
	first, _ := strconv.ParseUint(token, 10, 64)

	out = mustFencer(t, "lock", "status", "job")
	if !strings.HasPrefix(out, `lock=job held=true holder="cli-test" token=`+token+" ttl=30s remaining=") {
		t.Fatalf("status %q", out)
	}
	out = mustFencer(t, "lock", "list", "-o", "json")
	var list wire.LockList
	if err := json.Unmarshal([]byte(out), &list); err != nil || len(list.Locks) != 1 || strconv.FormatUint(list.Locks[0].Token, 10) != token {
		t.Fatalf("list %q: %v", out, err)
	}
	if out := mustFencer(t, "lock", "renew", "job", "--token", token, "--lease", lease); out != "token="+token+" ttl=30s\n" {
		t.Fatalf("renew %q", out)
	}

	// A second acquire fails with one clear line and a non-zero status.
	_, _, err := fencer(t, "", "lock", "acquire", "job")
	if !errors.Is(err, client.ErrLockHeld) || cli.ExitCode(err) == 0 || strings.Contains(cli.OneLine(err), "\n") || !strings.Contains(err.Error(), "cli-test") {
		t.Fatalf("second acquire: %v", err)
	}
	// Under -o json the error is JSON on stderr, with the server's code.
	code, stdout, stderr := runFencer(t, "lock", "acquire", "job", "-o", "json")
	var e cli.ErrorBody
	if err := json.Unmarshal([]byte(stderr), &e); err != nil || code != 1 || stdout != "" || e.Code != wire.CodeLockHeld || !strings.Contains(e.Error, `held by "cli-test"`) {
		t.Fatalf("second acquire -o json: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}

	if out := mustFencer(t, "kv", "put", "cfg", "v1", "--token", token, "--lock", "job"); out != "key=cfg token="+token+"\n" {
		t.Fatalf("put %q", out)
	}
	out, stderr, err = fencer(t, "", "kv", "get", "cfg")
	if err != nil || out != "v1" || stderr != "token="+token+"\n" {
		t.Fatalf("get: %q %q %v", out, stderr, err)
	}
	// The same token again is a replay: stale.
	if _, _, err := fencer(t, "from stdin", "kv", "put", "cfg", "-", "--token", token); !errors.Is(err, client.ErrStaleToken) {
		t.Fatalf("replayed put: %v", err)
	}
	if _, _, err := fencer(t, "", "kv", "put", "cfg", "v"); err == nil || !strings.Contains(err.Error(), "--token is required") {
		t.Fatalf("put without token: %v", err)
	}

	if out := mustFencer(t, "lock", "release", "job", "--token", token, "--lease", lease); out != "released token="+token+"\n" {
		t.Fatalf("release %q", out)
	}
	if out := mustFencer(t, "lock", "status", "job"); out != "lock=job held=false\n" {
		t.Fatalf("status after release %q", out)
	}
	if _, _, err := fencer(t, "", "lock", "renew", "job", "--token", token, "--lease", lease); !errors.Is(err, client.ErrLeaseLost) {
		t.Fatalf("renew after release: %v", err)
	}

	out = mustFencer(t, "lock", "acquire", "job", "-o", "json")
	var g wire.Grant
	if err := json.Unmarshal([]byte(out), &g); err != nil || g.Token <= first || len(g.Lease) != 32 || g.Lock != "job" {
		t.Fatalf("json acquire %q: %v", out, err)
	}
	if _, _, err := fencer(t, "from stdin", "kv", "put", "cfg", "-", "--token", strconv.FormatUint(g.Token, 10)); err != nil {
		t.Fatal(err)
	}
	out = mustFencer(t, "kv", "get", "cfg", "-o", "json")
	var v clientcmd.KVValue
	if err := json.Unmarshal([]byte(out), &v); err != nil || v != (clientcmd.KVValue{Key: "cfg", Token: g.Token, Value: "from stdin"}) {
		t.Fatalf("json get %q: %v", out, err)
	}
	if _, _, err := fencer(t, "", "kv", "get", "nothing"); !errors.Is(err, client.ErrNotFound) {
		t.Fatalf("get missing: %v", err)
	}
	// kv delete removes the key and its last token (no ACL here: anyone may).
	if out := mustFencer(t, "kv", "delete", "cfg"); out != "deleted key=cfg last_token="+strconv.FormatUint(g.Token, 10)+"\n" {
		t.Fatalf("delete %q", out)
	}
	if _, _, err := fencer(t, "", "kv", "get", "cfg"); !errors.Is(err, client.ErrNotFound) {
		t.Fatalf("get after delete: %v", err)
	}
	if _, _, err := fencer(t, "", "kv", "delete", "cfg"); !errors.Is(err, client.ErrNotFound) {
		t.Fatalf("second delete: %v", err)
	}
	if _, _, err := fencer(t, "", "kv", "put", "cfg", "again", "--token", strconv.FormatUint(first, 10)); err != nil {
		t.Fatalf("an older token after the delete: %v", err)
	}
	if _, _, err := fencer(t, "", "lock", "list", "-o", "yaml"); err == nil || !strings.Contains(err.Error(), "--output") {
		t.Fatalf("bad output: %v", err)
	}
}

// Misleading errors, end to end: a release or renewal with another lock's
// secret says so, a refused fenced write says it once, and an invalid name
// is quoted as typed.
func TestErrorsSayWhatHappened(t *testing.T) {
	newTestCluster(t)
	var a, b wire.Grant
	for name, g := range map[string]*wire.Grant{"lock-a": &a, "lock-b": &b} {
		if err := json.Unmarshal([]byte(mustFencer(t, "lock", "acquire", name, "--ttl", "30s", "-o", "json")), g); err != nil {
			t.Fatal(err)
		}
	}
	for _, verb := range []string{"renew", "release"} {
		_, _, err := fencer(t, "", "lock", verb, "lock-a", "--token", strconv.FormatUint(b.Token, 10), "--lease", b.Lease)
		if !errors.Is(err, client.ErrLeaseLost) || !strings.Contains(err.Error(), `lease does not belong to lock "lock-a": its secret was issued for another lock`) {
			t.Errorf("%s of lock-a with lock-b's grant: %v", verb, err)
		}
	}
	mustFencer(t, "lock", "release", "lock-a", "--token", strconv.FormatUint(a.Token, 10), "--lease", a.Lease)
	_, _, err := fencer(t, "", "lock", "renew", "lock-a", "--token", strconv.FormatUint(a.Token, 10), "--lease", a.Lease)
	if !errors.Is(err, client.ErrLeaseLost) || !strings.Contains(err.Error(), `lock "lock-a"'s grant with token `+strconv.FormatUint(a.Token, 10)+" is no longer current") {
		t.Errorf("renew after release: %v", err)
	}

	_, _, err = fencer(t, "", "kv", "put", "k", "v", "--token", strconv.FormatUint(a.Token, 10), "--lock", "lock-a")
	if !errors.Is(err, client.ErrNotLockHolder) || strings.Count(err.Error(), "current grant") != 1 {
		t.Errorf("put with an ended grant: %v", err)
	}
	_, _, err = fencer(t, "", "lock", "status", "team/job")
	if !errors.Is(err, client.ErrInvalid) || !strings.Contains(err.Error(), `lock name "team/job"`) {
		t.Errorf("status of a name with a slash: %v", err)
	}
}

// A renew or release without its grant points at the acquire of its own
// group: a permit's token comes from "fencer sem acquire", not "lock".
func TestMissingGrantFlagsNameTheGroupsAcquire(t *testing.T) {
	for _, group := range []string{"lock", "sem"} {
		for _, sub := range []string{"renew", "release"} {
			for _, args := range [][]string{{"--lease", "s"}, {"--token", "7"}} {
				cmdline := append([]string{group, sub, "job"}, args...)
				_, _, err := fencer(t, "", cmdline...)
				want := `"fencer ` + group + ` acquire"`
				if err == nil || !strings.Contains(err.Error(), want) {
					t.Errorf("fencer %s: got %v, want an error naming %s", strings.Join(cmdline, " "), err, want)
				}
			}
		}
	}
}
