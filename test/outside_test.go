package test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fencer-io/fencer/test/chaos/harness"
	tc "github.com/fencer-io/fencer/test/testcluster"
)

// Issue 25: fencer driven as an outside client drives it. Real fencer serve
// processes on free loopback ports; nothing awaited but GET /readyz = 200
// on every member; then every primitive, through plain HTTP and the
// documented API alone (not api/client, which retries), each call once and
// to the next member in turn (followers forward). The same round follows
// each transition an operator makes: restarting each member, replacing
// one, a leadership transfer, a fourth member joining. Each call that is
// refused is reported with its status, code and body, and the round goes
// on with the calls that do not depend on it.
func TestOutsideClientEveryPrimitiveAfterReadyz(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and runs a cluster of processes")
	}
	oc := startOutside(t, 3)
	oc.awaitReady(t)
	var granted []outsideToken
	round := func(t *testing.T, members []*outsideMember, prefix string) {
		granted = append(granted, outsideRound(t, oc, members, prefix)...)
	}
	t.Run("fresh", func(t *testing.T) { round(t, oc.members, "fresh") })
	for _, id := range []string{"n1", "n2", "n3"} {
		t.Run("restart-"+id, func(t *testing.T) {
			m := oc.member(t, id)
			oc.stop(t, m)
			oc.start(t, m, m.args...)
			oc.awaitReady(t)
			round(t, oc.startingWith(m), "restart-"+id)
		})
	}
	t.Run("replace-n3", func(t *testing.T) {
		old := oc.member(t, "n3")
		oc.stop(t, old)
		via := oc.members[0]
		if st, body := oc.do(t, "DELETE", via, "/v1/cluster/members/n3", ""); st != http.StatusOK {
			t.Fatalf("DELETE /v1/cluster/members/n3 via %s: %d %s", via.id, st, body)
		}
		oc.forget(old)
		m := oc.join(t, "n4")
		oc.awaitReady(t)
		round(t, oc.startingWith(m), "replace-n3")
	})
	t.Run("transfer", func(t *testing.T) {
		via := oc.members[len(oc.members)-1]
		if st, body := oc.do(t, "POST", via, "/v1/cluster/leader/transfer", "{}"); st != http.StatusOK {
			t.Fatalf("POST /v1/cluster/leader/transfer via %s: %d %s", via.id, st, body)
		}
		oc.awaitReady(t)
		round(t, oc.members, "transfer")
	})
	t.Run("join-fourth", func(t *testing.T) {
		m := oc.join(t, "n5")
		oc.awaitReady(t)
		round(t, oc.startingWith(m), "join-fourth")
	})
	// Seconds later, every grant of the test is still answered by every
	// member, the fresh cluster's first ones included (issue 25 saw them
	// answered "older than the grant history this cluster keeps").
	t.Run("every-grant-kept", func(t *testing.T) {
		for _, g := range granted {
			path := "/v1/tokens/" + strconv.FormatUint(g.token, 10)
			var answers []string
			first := ""
			for _, m := range oc.members {
				st, body := oc.do(t, "GET", m, path, "")
				e := outsideError(body)
				answers = append(answers, fmt.Sprintf("%s %d %s", m.id, st, e.Reason))
				if (st != http.StatusOK || !strings.Contains(body, g.name)) && first == "" {
					first = fmt.Sprintf("%s: %d %s", m.id, st, strings.TrimSpace(body))
				}
			}
			if first != "" {
				t.Errorf("%s %s: GET %s: %s; first refusal %s", g.round, g.what, path, strings.Join(answers, ", "), first)
			}
		}
	})
}

// outsideToken is a token a round was granted, for the lookups at the end.
type outsideToken struct {
	round, what, name string
	token             uint64
}

// Issue 25, item 3: a member answers a token lookup from its own applied
// state, so a follower asked right after a grant may not have applied it
// yet; it may answer the grant or a retryable error, never a definite 404
// ("never granted", "not kept", "no history") for a token the client holds.
// The first grant of a new cluster, made in its first second, is looked up
// on every member first: it must not be "older than the history kept".
func TestOutsideTokenLookupNeverFalselyDefinite(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and runs a cluster of processes")
	}
	oc := startOutside(t, 3)
	oc.awaitReady(t)
	ready := time.Now()

	t.Run("first-second", func(t *testing.T) {
		g, ok := outsideAcquire(t, oc, oc.members[0], "early.lock", `{"holder":"outsider","ttl_ms":10000}`)
		if !ok {
			return
		}
		for _, m := range oc.members {
			st, body := oc.do(t, "GET", m, "/v1/tokens/"+strconv.FormatUint(g.Token, 10), "")
			if bad := falseDefinite(st, body); bad != "" {
				t.Errorf("GET /v1/tokens/%d on %s, %v after /readyz: %s: %d %s",
					g.Token, m.id, time.Since(ready).Round(time.Millisecond), bad, st, body)
			}
		}
	})

	t.Run("stale-follower", func(t *testing.T) {
		leader := oc.leader(t)
		var followers []*outsideMember
		for _, m := range oc.members {
			if m != leader {
				followers = append(followers, m)
			}
		}
		const tries = 50
		answers := map[string]int{}
		var bad []string
		for i := range tries {
			// Half through the leader, half forwarded by one follower; the
			// lookup goes to a follower that did not carry the request.
			via, asked := leader, followers[i%2]
			if i%4 >= 2 {
				via, asked = followers[(i+1)%2], followers[i%2]
			}
			name := fmt.Sprintf("stale.%d", i)
			g, ok := outsideAcquire(t, oc, via, name, `{"holder":"outsider","ttl_ms":10000}`)
			if !ok {
				return
			}
			st, body, hdr := oc.send(t, "GET", asked, "/v1/tokens/"+strconv.FormatUint(g.Token, 10), "")
			e := outsideError(body)
			answers[fmt.Sprintf("%d %s %s", st, e.Code, e.Reason)]++
			if why := falseDefinite(st, body); why != "" {
				bad = append(bad, fmt.Sprintf("try %d: token %d acquired via %s, GET /v1/tokens/%d on %s: %s: %d %s (Fencer-Index %s)",
					i, g.Token, via.id, g.Token, asked.id, why, st, strings.TrimSpace(body), hdr.Get("Fencer-Index")))
			}
			oc.do(t, "POST", via, "/v1/locks/"+name+"/release", fmt.Sprintf(`{"lease":%q,"token":%d}`, g.Lease, g.Token))
		}
		t.Logf("answers of %d lookups right after the grant: %v", tries, answers)
		if len(bad) > 0 {
			t.Errorf("%d of %d lookups answered a false definite answer; the first:\n%s", len(bad), tries,
				strings.Join(bad[:min(len(bad), 5)], "\n"))
		}
	})
}

// falseDefinite says what is wrong with a token lookup's answer for a token
// the client was granted: the grant for the wrong lock, a 404 (every reason
// is definite, and false here), or anything but the grant or a retryable
// 503. It returns "" for an acceptable answer.
func falseDefinite(status int, body string) string {
	switch status {
	case http.StatusOK:
		return ""
	case http.StatusServiceUnavailable:
		return ""
	case http.StatusNotFound:
		e := outsideError(body)
		return fmt.Sprintf("a false definite %s (reason %q) for a granted token", e.Code, e.Reason)
	}
	return "neither the grant nor a retryable error"
}

// outsideCluster is a cluster of fencer serve processes, as an operator
// runs them.
type outsideCluster struct {
	bin, dir string
	group    *harness.Group
	client   *http.Client
	// members are the running members, in the order of the round-robin.
	members []*outsideMember
	initial string // the --initial-cluster flag of the first members
}

type outsideMember struct {
	id, httpAddr, raftAddr, dataDir, log string
	args                                 []string // the mode flags it was started with
	proc                                 *harness.Proc
}

// startOutside builds fencer and starts n members together with
// --initial-cluster, each on free loopback ports below the ephemeral range.
// It waits for nothing.
func startOutside(t *testing.T, n int) *outsideCluster {
	t.Helper()
	work := t.TempDir()
	oc := &outsideCluster{bin: tc.BuildFencer(t, work), dir: work, group: &harness.Group{},
		client: &http.Client{Timeout: 10 * time.Second}}
	t.Cleanup(func() {
		oc.group.KillAll()
		if t.Failed() {
			oc.dumpLogs(t)
		}
	})
	var peers []string
	for i := 1; i <= n; i++ {
		m := oc.newMember(t, fmt.Sprintf("n%d", i))
		peers = append(peers, fmt.Sprintf("%s=%s@%s", m.id, m.raftAddr, m.httpAddr))
		oc.members = append(oc.members, m)
	}
	oc.initial = strings.Join(peers, ",")
	for _, m := range oc.members {
		oc.start(t, m, "--initial-cluster", oc.initial)
	}
	return oc
}

func (oc *outsideCluster) newMember(t *testing.T, id string) *outsideMember {
	t.Helper()
	httpAddr, err := harness.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	raftAddr, err := harness.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	return &outsideMember{id: id, httpAddr: httpAddr, raftAddr: raftAddr,
		dataDir: filepath.Join(oc.dir, id), log: filepath.Join(oc.dir, id+".log")}
}

func (oc *outsideCluster) start(t *testing.T, m *outsideMember, mode ...string) {
	t.Helper()
	args := append([]string{"serve", "--id", m.id, "--data-dir", m.dataDir,
		"--http-addr", m.httpAddr, "--raft-addr", m.raftAddr}, mode...)
	p, err := oc.group.Start(harness.Spec{Name: m.id, Path: oc.bin, Args: args, Log: m.log})
	if err != nil {
		t.Fatal(err)
	}
	m.proc, m.args = p, mode
}

// stop sends SIGTERM, as a service manager does, and waits for the exit.
func (oc *outsideCluster) stop(t *testing.T, m *outsideMember) {
	t.Helper()
	if err := m.proc.Terminate(); err != nil {
		t.Fatal(err)
	}
	if !m.proc.WaitExit(20 * time.Second) {
		t.Fatalf("%s still running 20s after SIGTERM", m.id)
	}
	if err := m.proc.ExitErr(); err != nil {
		t.Fatalf("%s exited after SIGTERM: %v", m.id, err)
	}
	// A kept-alive connection to the stopped process must not carry the
	// next request to the one started on its address.
	oc.client.CloseIdleConnections()
}

// join starts a new member with an empty data dir that joins through the
// running members.
func (oc *outsideCluster) join(t *testing.T, id string) *outsideMember {
	t.Helper()
	m := oc.newMember(t, id)
	var via []string
	for _, r := range oc.members {
		via = append(via, r.httpAddr)
	}
	oc.start(t, m, "--join", strings.Join(via, ","))
	oc.members = append(oc.members, m)
	return m
}

func (oc *outsideCluster) forget(m *outsideMember) {
	oc.members = slices.DeleteFunc(oc.members, func(r *outsideMember) bool { return r == m })
}

func (oc *outsideCluster) member(t *testing.T, id string) *outsideMember {
	t.Helper()
	for _, m := range oc.members {
		if m.id == id {
			return m
		}
	}
	t.Fatalf("no member %s", id)
	return nil
}

// startingWith is the members with m first, so that the round's first call
// goes to the member just restarted or added.
func (oc *outsideCluster) startingWith(m *outsideMember) []*outsideMember {
	i := slices.Index(oc.members, m)
	return append(slices.Clone(oc.members[i:]), oc.members[:i]...)
}

// awaitReady polls GET /readyz on every running member until each answers
// 200: the only thing an outside client may wait for.
func (oc *outsideCluster) awaitReady(t *testing.T) {
	t.Helper()
	for _, m := range oc.members {
		tc.Poll(t, 30*time.Second, m.id+" to answer /readyz 200", func() bool {
			if !m.proc.Running() {
				t.Fatalf("%s exited: %v", m.id, m.proc.ExitErr())
			}
			resp, err := oc.client.Get("http://" + m.httpAddr + "/readyz")
			if err != nil {
				return false
			}
			resp.Body.Close()
			return resp.StatusCode == http.StatusOK
		})
	}
}

// leader asks a member who leads, as GET /v1/cluster says.
func (oc *outsideCluster) leader(t *testing.T) *outsideMember {
	t.Helper()
	st, body := oc.do(t, "GET", oc.members[0], "/v1/cluster", "")
	var cs struct {
		Leader string `json:"leader"`
	}
	if st != http.StatusOK || json.Unmarshal([]byte(body), &cs) != nil {
		t.Fatalf("GET /v1/cluster: %d %s", st, body)
	}
	return oc.member(t, cs.Leader)
}

// do sends one request to m and returns its status and body; a transport
// error fails the test. A body goes as application/json.
func (oc *outsideCluster) do(t *testing.T, method string, m *outsideMember, path, body string, headers ...string) (int, string) {
	t.Helper()
	st, b, _ := oc.send(t, method, m, path, body, headers...)
	return st, b
}

// send is do that also returns the answer's headers.
func (oc *outsideCluster) send(t *testing.T, method string, m *outsideMember, path, body string, headers ...string) (int, string, http.Header) {
	t.Helper()
	req, err := http.NewRequest(method, "http://"+m.httpAddr+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := oc.client.Do(req)
	if err != nil {
		t.Fatalf("%s %s on %s: %v", method, path, m.id, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), resp.Header
}

func (oc *outsideCluster) dumpLogs(t *testing.T) {
	entries, _ := filepath.Glob(filepath.Join(oc.dir, "*.log"))
	for _, f := range entries {
		b, _ := os.ReadFile(f)
		t.Logf("--- %s (tail)\n%s", filepath.Base(f), tail(string(b), 15))
	}
}

// outsideGrant is the part of an acquire's answer the round uses.
type outsideGrant struct {
	Token uint64 `json:"token"`
	Lease string `json:"lease"`
	Value string `json:"value"`
}

type outsideErr struct {
	Code   string `json:"code"`
	Reason string `json:"reason"`
}

func outsideError(body string) outsideErr {
	var e outsideErr
	json.Unmarshal([]byte(body), &e)
	return e
}

// outsideAcquire acquires lock name through m, reporting a refusal.
func outsideAcquire(t *testing.T, oc *outsideCluster, m *outsideMember, name, body string) (outsideGrant, bool) {
	t.Helper()
	var g outsideGrant
	st, resp := oc.do(t, "POST", m, "/v1/locks/"+name+"/acquire", body)
	if st != http.StatusOK || json.Unmarshal([]byte(resp), &g) != nil || g.Token == 0 {
		t.Errorf("POST /v1/locks/%s/acquire %s on %s: %d %s", name, body, m.id, st, strings.TrimSpace(resp))
		return g, false
	}
	return g, true
}

// outsideRound uses every primitive once, each call to the next of members
// in turn, with names under prefix. A refused call fails the test with its
// status and body; calls that need its answer are skipped. It returns the
// lock grant and the permit it got.
func outsideRound(t *testing.T, oc *outsideCluster, members []*outsideMember, prefix string) []outsideToken {
	t.Helper()
	turn := 0
	var last *outsideMember // the member the last call went to
	next := func() *outsideMember {
		m := members[turn%len(members)]
		turn++
		return m
	}
	// call sends one request to the next member; a status other than want
	// is reported with the call, the member, and the answer.
	call := func(what string, want int, method, path, body string, headers ...string) (string, bool) {
		t.Helper()
		m := next()
		last = m
		start := time.Now()
		st, resp, hdr := oc.send(t, method, m, path, body, headers...)
		// A call held long (for a leader, for a format) is worth knowing
		// even when it succeeds.
		if took := time.Since(start); took > 250*time.Millisecond {
			t.Logf("%s: %s: %s %s on %s took %v (%d)", prefix, what, method, path, m.id, took.Round(time.Millisecond), st)
		}
		if st != want {
			sent := method + " " + path
			if body != "" {
				sent += " " + body
			}
			at := ""
			if i := hdr.Get("Fencer-Index"); i != "" {
				at = " (Fencer-Index " + i + ")"
			}
			t.Errorf("%s: %s: %s on %s: %d %s%s", prefix, what, sent, m.id, st, strings.TrimSpace(resp), at)
			return resp, false
		}
		return resp, true
	}
	grant := func(what, method, path, body string) (outsideGrant, bool) {
		t.Helper()
		var g outsideGrant
		resp, ok := call(what, http.StatusOK, method, path, body)
		if ok && (json.Unmarshal([]byte(resp), &g) != nil || g.Token == 0 || g.Lease == "") {
			t.Errorf("%s: %s: %s %s on %s: no token and lease in %s", prefix, what, method, path, last.id, resp)
			return g, false
		}
		return g, ok
	}
	release := func(kind, name string, g outsideGrant) {
		t.Helper()
		call(kind+" release", http.StatusOK, "POST", "/v1/"+kind+"/"+name+"/release", fmt.Sprintf(`{"lease":%q,"token":%d}`, g.Lease, g.Token))
	}
	lookup := func(what string, token uint64) (map[string]any, bool) {
		t.Helper()
		resp, ok := call(what, http.StatusOK, "GET", "/v1/tokens/"+strconv.FormatUint(token, 10), "")
		var rec map[string]any
		if ok && json.Unmarshal([]byte(resp), &rec) != nil {
			t.Errorf("%s: %s on %s: not JSON: %s", prefix, what, last.id, resp)
			return nil, false
		}
		return rec, ok
	}

	// The commands the log-format gate guards (a semaphore, a value, a
	// lock-delay, a key's delete) come early, while the lock is held: on a
	// cluster that just said it is ready they are the ones refused.
	lock, key := prefix+".lock", prefix+".key"
	g, locked := grant("lock acquire", "POST", "/v1/locks/"+lock+"/acquire", `{"holder":"outsider","ttl_ms":10000}`)

	// A semaphore permit.
	sem := prefix + ".sem"
	p, permitted := grant("semaphore acquire", "POST", "/v1/semaphores/"+sem+"/acquire", `{"holder":"outsider","limit":2,"ttl_ms":10000}`)
	if permitted {
		release("semaphores", sem, p)
	}

	// An election: a campaign with a value, a proclaim, a resign.
	elect := prefix + ".elect"
	if e, ok := grant("election acquire with value", "POST", "/v1/locks/"+elect+"/acquire",
		`{"holder":"outsider","ttl_ms":10000,"wait_ms":1000,"value":"10.0.0.1:80"}`); ok {
		if e.Value != "10.0.0.1:80" {
			t.Errorf("%s: election acquire with value on %s: value %q in the answer", prefix, last.id, e.Value)
		}
		call("proclaim", http.StatusOK, "POST", "/v1/locks/"+elect+"/value",
			fmt.Sprintf(`{"lease":%q,"token":%d,"value":"10.0.0.1:81"}`, e.Lease, e.Token))
		release("locks", elect, e)
	}

	// A grant with a lock-delay (released: no delay follows).
	delayed := prefix + ".delay"
	if d, ok := grant("acquire with lock-delay", "POST", "/v1/locks/"+delayed+"/acquire",
		`{"holder":"outsider","ttl_ms":10000,"lock_delay_ms":1000}`); ok {
		release("locks", delayed, d)
	}

	// The lock's fenced key, then the lock's history, token and event.
	if locked {
		call("fenced put", http.StatusOK, "PUT", "/v1/kv/"+key, "v1",
			"Content-Type", "text/plain", "Fencing-Token", strconv.FormatUint(g.Token, 10), "Fencing-Lock", lock)
		call("fenced delete", http.StatusOK, "DELETE", "/v1/kv/"+key, "")
		release("locks", lock, g)
		if resp, ok := call("lock history", http.StatusOK, "GET", "/v1/locks/"+lock+"/history", ""); ok {
			var h struct {
				Grants []struct {
					Token uint64 `json:"token"`
				} `json:"grants"`
			}
			json.Unmarshal([]byte(resp), &h)
			found := false
			for _, r := range h.Grants {
				found = found || r.Token == g.Token
			}
			if !found {
				t.Errorf("%s: lock history: GET /v1/locks/%s/history on %s: grant %d missing: %s", prefix, lock, last.id, g.Token, strings.TrimSpace(resp))
			}
		}
		if rec, ok := lookup("lock token lookup", g.Token); ok && rec["lock"] != lock {
			t.Errorf("%s: lock token lookup: GET /v1/tokens/%d on %s: %v, want lock %s", prefix, g.Token, last.id, rec, lock)
		}
	}
	// Permits enter the history (issue 25, item 2); how the answer names
	// the semaphore is not settled, only that it does.
	if permitted {
		if rec, ok := lookup("permit token lookup", p.Token); ok && !strings.Contains(fmt.Sprint(rec), sem) {
			t.Errorf("%s: permit token lookup: GET /v1/tokens/%d on %s: %v does not name semaphore %s", prefix, p.Token, last.id, rec, sem)
		}
	}
	var tokens []outsideToken
	if locked {
		outsideEvent(t, oc, next(), prefix, lock, g.Token)
		tokens = append(tokens, outsideToken{prefix, "lock grant", lock, g.Token})
	}
	if permitted {
		tokens = append(tokens, outsideToken{prefix, "permit", sem, p.Token})
	}
	return tokens
}

// outsideEvent reads GET /v1/events on m from just before the grant of
// token on lock, and reports it if the grant's acquired event does not
// arrive within 5 s.
func outsideEvent(t *testing.T, oc *outsideCluster, m *outsideMember, prefix, lock string, token uint64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	path := fmt.Sprintf("/v1/events?prefix=%s&since=%d", lock, token-1)
	req, err := http.NewRequestWithContext(ctx, "GET", "http://"+m.httpAddr+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Errorf("%s: event stream: GET %s on %s: %v", prefix, path, m.id, err)
		return
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		t.Errorf("%s: event stream: GET %s on %s: %d %s", prefix, path, m.id, resp.StatusCode, strings.TrimSpace(string(b)))
		return
	}
	var seen []string
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		seen = append(seen, data)
		var e struct {
			Type  string `json:"type"`
			Lock  string `json:"lock"`
			Token uint64 `json:"token"`
		}
		if json.Unmarshal([]byte(data), &e) == nil && e.Type == "acquired" && e.Lock == lock && e.Token == token {
			return
		}
	}
	t.Errorf("%s: event stream: GET %s on %s: no acquired event of token %d within 5s (%v); got %v", prefix, path, m.id, token, sc.Err(), seen)
}
