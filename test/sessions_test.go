package test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/fencer-io/fencer/api/wire"
)

// Issue 27: a session, driven as an outside client drives it (real fencer
// serve processes, plain HTTP, nothing awaited but /readyz and answers).
// One session holds three locks and a permit; a grant under it refuses
// its own renewal; releasing one keeps the others; across a leadership
// transfer the first call renews it; once its renewals stop, every grant
// under it ends at one log index (the session's, in the grant history and
// the events), a waiter gets its lock there, and a lock-bound write with
// any of its tokens is refused from then on.
func TestSessionLifecycleAsAnOutsideClient(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and runs a cluster of processes")
	}
	oc := startOutside(t, 3)
	oc.awaitReady(t)
	n1, n2, n3 := oc.members[0], oc.members[1], oc.members[2]
	expect := func(what string, want int, m *outsideMember, method, path, body string, headers ...string) string {
		t.Helper()
		st, resp := oc.do(t, method, m, path, body, headers...)
		if st != want {
			t.Fatalf("%s: %s %s %s on %s: %d %s, want %d", what, method, path, body, m.id, st, resp, want)
		}
		return resp
	}
	var sess wire.Session
	json.Unmarshal([]byte(expect("create", 200, n2, "POST", "/v1/sessions", `{"holder":"svc","ttl_ms":3000}`)), &sess)
	if sess.Session == 0 || len(sess.Lease) != wire.LeaseSecretLen {
		t.Fatalf("session %+v", sess)
	}
	under := fmt.Sprintf(`"session":%d,"session_lease":%q`, sess.Session, sess.Lease)
	grants := map[string]wire.Grant{}
	for i, name := range []string{"s-a", "s-b", "s-c"} {
		var g wire.Grant
		json.Unmarshal([]byte(expect("acquire "+name, 200, oc.members[i], "POST", "/v1/locks/"+name+"/acquire", `{"holder":"svc",`+under+`}`)), &g)
		if g.Session != sess.Session || g.Token <= sess.Session || g.TTLMillis != 3000 {
			t.Fatalf("grant of %s under the session: %+v", name, g)
		}
		grants[name] = g
	}
	var permit wire.PermitGrant
	json.Unmarshal([]byte(expect("permit", 200, n1, "POST", "/v1/semaphores/s-sem/acquire", `{"holder":"svc","limit":2,`+under+`}`)), &permit)
	if e := outsideError(expect("a grant's own renewal", 409, n3, "POST", "/v1/locks/s-a/renew",
		fmt.Sprintf(`{"lease":%q,"token":%d}`, grants["s-a"].Lease, grants["s-a"].Token))); e.Code != wire.CodeSessionGrant {
		t.Fatalf("renewing a grant under a session: %+v, want session_grant", e)
	}
	if e := outsideError(expect("a wrong session lease", 409, n1, "POST", "/v1/locks/s-d/acquire",
		fmt.Sprintf(`{"holder":"svc","session":%d,"session_lease":"0123456789abcdef0123456789abcdef"}`, sess.Session))); e.Code != wire.CodeSessionMismatch {
		t.Fatalf("acquire with a wrong session lease: %+v", e)
	}
	expect("release s-b", 200, n2, "POST", "/v1/locks/s-b/release", fmt.Sprintf(`{"lease":%q,"token":%d}`, grants["s-b"].Lease, grants["s-b"].Token))

	renew := fmt.Sprintf(`{"lease":%q}`, sess.Lease)
	path := "/v1/sessions/" + strconv.FormatUint(sess.Session, 10)
	expect("transfer", 200, n3, "POST", "/v1/cluster/leader/transfer", "{}")
	oc.awaitReady(t)
	expect("renew after the transfer", 200, n1, "POST", path+"/renew", renew)
	var st wire.SessionStatus
	json.Unmarshal([]byte(expect("status", 200, n2, "GET", path, "")), &st)
	if len(st.Grants) != 3 || st.RemainingMillis == nil {
		t.Fatalf("session status after releasing s-b: %+v, want s-a, s-c and the permit", st)
	}
	// A waiter for s-c, then no more renewals.
	waited := make(chan wire.Grant, 1)
	go func() {
		var g wire.Grant
		_, resp := oc.do(t, "POST", n3, "/v1/locks/s-c/acquire", `{"holder":"next","ttl_ms":10000,"wait_ms":20000}`)
		json.Unmarshal([]byte(resp), &g)
		waited <- g
	}()
	deadline := time.Now().Add(20 * time.Second)
	for {
		code, _ := oc.do(t, "GET", n1, path, "")
		if code == http.StatusGone {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("session still answered %d 20 s after its last renewal (TTL 3 s)", code)
		}
		time.Sleep(50 * time.Millisecond) // polling an answer, with a deadline
	}
	// Every grant under it ended at one index.
	ends := map[uint64]bool{}
	for _, name := range []string{"s-a", "s-c"} {
		var h wire.LockHistory
		json.Unmarshal([]byte(expect("history "+name, 200, n2, "GET", "/v1/locks/"+name+"/history", "")), &h)
		for _, g := range h.Grants {
			if g.Token == grants[name].Token {
				if g.Ended != "expired" && g.Ended != "handed_off" {
					t.Errorf("%s's grant %d ended %q", name, g.Token, g.Ended)
				}
				ends[g.EndedIndex] = true
			}
		}
	}
	var ph wire.SemaphoreHistory
	json.Unmarshal([]byte(expect("permit history", 200, n3, "GET", "/v1/semaphores/s-sem/history", "")), &ph)
	for _, g := range ph.Grants {
		if g.Token == permit.Token {
			ends[g.EndedIndex] = true
		}
	}
	if len(ends) != 1 || ends[0] {
		t.Fatalf("the session's grants ended at indexes %v, want one", ends)
	}
	var end uint64
	for i := range ends {
		end = i
	}
	g := <-waited
	if g.Token != end || g.Holder != "next" {
		t.Errorf("the waiter for s-c got %+v, want the session's end (token %d)", g, end)
	}
	for _, name := range []string{"s-a", "s-c"} {
		st, resp := oc.do(t, "PUT", n1, "/v1/kv/s-key-"+name, "late write",
			wire.HeaderToken, strconv.FormatUint(grants[name].Token, 10), wire.HeaderLock, name)
		if st == http.StatusOK || outsideError(resp).Code != wire.CodeNotLockHolder {
			t.Errorf("a lock-bound write with %s's token %d after its session ended: %d %s", name, grants[name].Token, st, resp)
		}
	}
	if e := outsideError(expect("acquire under the ended session", 410, n2, "POST", "/v1/locks/s-e/acquire", `{"holder":"svc",`+under+`}`)); e.Code != wire.CodeSessionExpired {
		t.Fatalf("acquire under an ended session: %+v", e)
	}
}
