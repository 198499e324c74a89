package uitest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/fencer-io/fencer/api/wire"
)

// Issue 28's revoke on the dashboard: a reader is offered no revoke
// button; an operator is, on a held lock's row and a session's; a
// cancelled confirmation revokes nothing; a confirmed one ends the grant
// (the waiter gets the lock, the feed says revoked) and the session (its
// row leaves, its lock with it).
func TestDashboardRevoke(t *testing.T) {
	chromiumPath(t)
	c := aclCluster(t)
	st := c.agreedLeader(c.nodes[0], operatorSecret, "", 20*time.Second)
	f := follower(c, st.Leader)
	stuck := acquire(t, f, operatorSecret, "stuck", `{"holder":"stuck-worker","ttl_ms":60000}`)
	code, resp := request(f, http.MethodPost, "/v1/sessions", operatorSecret, `{"holder":"batch-7","ttl_ms":60000}`)
	var sess wire.Session
	if code != http.StatusOK || json.Unmarshal([]byte(resp), &sess) != nil {
		t.Fatalf("create a session: %d %s", code, resp)
	}
	acquire(t, f, operatorSecret, "part-1", fmt.Sprintf(`{"holder":"batch-7","session":%d,"session_lease":%q}`, sess.Session, sess.Lease))

	pg := openPage(t, f.url()+"/ui/")
	signIn(pg, readerSecret)
	pg.waitFor(10*time.Second, "the reader's locks and sessions", fmt.Sprintf(
		`document.querySelector("#who-role").textContent === "reader" && !!document.querySelector('#locks tr[data-lock="stuck"]') && !!document.querySelector('#sessions tr[data-session="%d"]')`, sess.Session))
	if n := pg.count("button.revoke"); n != 0 {
		t.Errorf("a reader is offered %d revoke buttons", n)
	}
	pg.click("#sign-out")
	pg.waitFor(5*time.Second, "the prompt after signing out", `!document.querySelector("#login").hidden`)

	signIn(pg, operatorSecret)
	lockButton := `#locks tr[data-lock="stuck"] button.revoke`
	sessionButton := fmt.Sprintf(`#sessions tr[data-session="%d"] button.revoke`, sess.Session)
	pg.waitFor(10*time.Second, "the operator's revoke buttons", fmt.Sprintf(`!!document.querySelector(%q) && !!document.querySelector(%q) && document.querySelector("#events-state").dataset.state === "live"`, lockButton, sessionButton))
	pg.shot("revoke-operator")

	// A waiter, so that the revoke hands the lock over in its entry.
	waited := make(chan wire.Grant, 1)
	go func() {
		_, resp := request(f, http.MethodPost, "/v1/locks/stuck/acquire", operatorSecret, `{"holder":"next-worker","ttl_ms":60000,"wait_ms":30000}`)
		var g wire.Grant
		json.Unmarshal([]byte(resp), &g)
		waited <- g
	}()
	pg.waitFor(10*time.Second, "the waiter on the row", `document.querySelector('#locks tr[data-lock="stuck"] .waiters').textContent === "1"`)

	// Cancelled: nothing happens.
	pg.click(lockButton)
	pg.waitFor(5*time.Second, "the confirmation", fmt.Sprintf(`document.querySelector("#confirm").open && document.querySelector("#confirm-text").textContent.includes("t%d")`, stuck.Token))
	pg.shot("revoke-confirm")
	pg.click("#confirm-cancel")
	pg.waitFor(5*time.Second, "the confirmation closed", `!document.querySelector("#confirm").open`)
	// Nothing may follow: a revoke sent anyway would land within a
	// second, so the grant is watched that long (a bound, not a wait for
	// a state).
	for end := time.Now().Add(time.Second); time.Now().Before(end); {
		if code, resp := request(f, http.MethodGet, "/v1/locks/stuck", operatorSecret, ""); code != http.StatusOK || !containsToken(resp, stuck.Token) {
			t.Fatalf("the lock changed without a confirmation: %d %s", code, resp)
		}
		if b := pg.text("#banner"); strings.Contains(b, "Revok") {
			t.Fatalf("the page revoked without a confirmation: %q", b)
		}
	}

	// Confirmed: the grant ends, the waiter gets the lock, the feed says so.
	pg.click(lockButton)
	pg.waitFor(5*time.Second, "the confirmation", `document.querySelector("#confirm").open`)
	pg.click("#confirm-ok")
	var next wire.Grant
	select {
	case next = <-waited:
	case <-time.After(10 * time.Second):
		t.Fatal("the waiter was not granted the revoked lock")
	}
	if next.Token <= stuck.Token || next.Holder != "next-worker" {
		t.Fatalf("the waiter's grant %+v after revoking t%d", next, stuck.Token)
	}
	pg.waitFor(10*time.Second, "the new holder on the row and the hand-off in the feed", fmt.Sprintf(
		`document.querySelector('#locks tr[data-lock="stuck"]').dataset.token === "%d" && document.querySelector("#feed").textContent.includes("revoked → next-worker")`, next.Token))
	pg.shot("revoke-lock-done")

	// The session, with its lock.
	pg.click(sessionButton)
	pg.waitFor(5*time.Second, "the session's confirmation", fmt.Sprintf(`document.querySelector("#confirm").open && document.querySelector("#confirm-title").textContent.includes("session %d")`, sess.Session))
	pg.click("#confirm-ok")
	pg.waitFor(10*time.Second, "the session and its lock to leave", fmt.Sprintf(
		`!document.querySelector('#sessions tr[data-session="%d"]') && !document.querySelector('#locks tr[data-lock="part-1"]') && document.querySelector("#feed").textContent.includes("revoked by an operator: every grant under it ended")`, sess.Session))
	pg.shot("revoke-session-done")
	if code, resp := request(f, http.MethodGet, fmt.Sprintf("/v1/sessions/%d", sess.Session), operatorSecret, ""); code != http.StatusGone || !json.Valid([]byte(resp)) {
		t.Fatalf("the revoked session: %d %s, want 410 revoked", code, resp)
	}
}

func containsToken(lockJSON string, token uint64) bool {
	var st wire.LockStatus
	return json.Unmarshal([]byte(lockJSON), &st) == nil && st.Held && st.Token == token
}
