package uitest

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"

	"github.com/fencer-io/fencer/api/wire"
)

// hostileHolder is markup a client may send as a holder: the page must
// show it as text (dom.js builds no element from a client's string), and
// the CSP would report the handler if it ever became an element.
const hostileHolder = `<img src=x onerror="window.fencerXSS=1">`

// holdLists makes the page's list reads (GET /v1/sessions, /v1/locks,
// /v1/semaphores) hang until their timeout, so that what the page shows
// next comes from the events stream alone; the events are not held.
const holdLists = `(() => {
  if (!window.fencerRealFetch) window.fencerRealFetch = window.fetch;
  window.fencerHeld = 0;
  window.fetch = (url, opts = {}) => {
    if (/^\/v1\/(sessions|locks|semaphores)$/.test(String(url))) {
      window.fencerHeld++;
      return new Promise((_, reject) => opts.signal && opts.signal.addEventListener("abort", () => reject(new DOMException("held by the test", "AbortError"))));
    }
    return window.fencerRealFetch(url, opts);
  };
  return true;
})()`

// showSessions scrolls the sessions card, below the fold of a laptop's
// window, into view for a screenshot.
func showSessions(pg *page) {
	pg.t.Helper()
	if !eval[bool](pg, `(() => { document.querySelector("#sessions").closest(".card").scrollIntoView({ block: "end" }); return true })()`) {
		pg.t.Fatal("no sessions card to scroll to")
	}
}

// darkScheme makes the page prefer the dark colour scheme, or not.
func darkScheme(pg *page, dark bool) {
	pg.t.Helper()
	var features []*emulation.MediaFeature
	if dark {
		features = []*emulation.MediaFeature{{Name: "prefers-color-scheme", Value: "dark"}}
	}
	pg.do(chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		_, err := cdp.Call(ctx, tg, emulation.SetEmulatedMedia, emulation.SetEmulatedMediaParams{Features: features})
		return err
	}))
	pg.waitFor(5*time.Second, "the colour scheme", fmt.Sprintf(`matchMedia("(prefers-color-scheme: dark)").matches === %v`, dark))
}

func postJSON[T any](t *testing.T, p *proc, path, body string) T {
	t.Helper()
	code, resp := request(p, http.MethodPost, path, "", body)
	var v T
	if code != http.StatusOK || json.Unmarshal([]byte(resp), &v) != nil {
		t.Fatalf("POST %s: %d %s", path, code, resp)
	}
	return v
}

// The page, opened on a follower, shows a session with its holder (markup
// shown as text), TTL, time left and its two locks and permit, each with
// its token, and names the session on the lock rows and the permit; when
// the session is closed, its row leaves with the session_closed event even
// while every list read hangs, and the locks go once the lists answer
// again. A session that runs out leaves the view too.
func TestDashboardShowsSessions(t *testing.T) {
	chromiumPath(t)
	c := startCluster(t, 3)
	st := c.agreedLeader(c.nodes[0], "", "", 20*time.Second)
	f := follower(c, st.Leader)
	pg := openPage(t, f.url()+"/ui/")
	pg.waitFor(10*time.Second, "the page following the events", `document.querySelector("#events-state").dataset.state === "live" && !document.querySelector("#sessions-empty").hidden`)

	ss := postJSON[wire.Session](t, f, "/v1/sessions", fmt.Sprintf(`{"holder":%q,"ttl_ms":30000}`, hostileHolder))
	under := fmt.Sprintf(`"holder":%q,"session":%d,"session_lease":%q`, hostileHolder, ss.Session, ss.Lease)
	a := postJSON[wire.Grant](t, f, "/v1/locks/part.a/acquire", "{"+under+"}")
	b := postJSON[wire.Grant](t, f, "/v1/locks/part.b/acquire", "{"+under+"}")
	p := postJSON[wire.PermitGrant](t, f, "/v1/semaphores/pool/acquire", `{"limit":2,`+under+"}")
	shown := time.Now()

	row := fmt.Sprintf(`#sessions tr[data-session="%d"]`, ss.Session)
	pg.waitFor(5*time.Second, "the session's row with its holder as text, its TTL, time left and three grants", fmt.Sprintf(`(() => {
	  const r = document.querySelector(%q);
	  if (!r) return false;
	  const grants = [...r.querySelectorAll(".grant")].map(g => g.dataset.kind + " " + g.querySelector(".grant-name").textContent + " " + g.querySelector(".token").textContent);
	  return r.querySelector(".holder").textContent === %q && r.querySelector(".ttl-ms").textContent === "30.0 s" &&
	    /^[0-9.]+ s$/.test((r.querySelector(".ttl-text") || {}).textContent || "") &&
	    grants.join(",") === %q;
	})()`, row, hostileHolder, fmt.Sprintf("lock part.a t%d,lock part.b t%d,semaphore pool t%d", a.Token, b.Token, p.Token)))
	t.Logf("the session was shown with its grants %v after the last acquire", time.Since(shown).Round(time.Millisecond))
	sessionName := fmt.Sprintf("session %d", ss.Session)
	pg.waitFor(5*time.Second, "the lock rows and the permit naming their session", fmt.Sprintf(`(() => {
	  const named = (sel) => { const e = document.querySelector(sel); return !!e && e.textContent === %q };
	  return named('#locks tr[data-lock="part.a"] .session-link') && named('#locks tr[data-lock="part.b"] .session-link') &&
	    named('#semaphores .permit[data-token="%d"] .session-link') &&
	    document.querySelector('#locks tr[data-lock="part.a"] .holder').textContent === %q;
	})()`, sessionName, p.Token, hostileHolder))
	pg.waitFor(5*time.Second, "the session_created event in the feed", fmt.Sprintf(
		`[...document.querySelectorAll('#feed li[data-type="session_created"]')].some(li => li.textContent.includes(%q))`, sessionName))
	if n := eval[int](pg, `document.querySelectorAll("#dash img").length`); n != 0 || eval[bool](pg, `window.fencerXSS !== undefined`) {
		t.Errorf("a holder's markup became %d elements in the page (fencerXSS %v)", n, eval[bool](pg, `window.fencerXSS !== undefined`))
	}
	showSessions(pg)
	pg.shot("sessions")
	if low := eval[[]string](pg, lowContrast); len(low) > 0 {
		t.Errorf("text below WCAG AA contrast with a session shown: %q", low)
	}
	darkScheme(pg, true)
	if low := eval[[]string](pg, lowContrast); len(low) > 0 {
		t.Errorf("text below WCAG AA contrast with a session shown in the dark scheme: %q", low)
	}
	pg.shot("sessions-dark")
	darkScheme(pg, false)

	// Closed while every list read hangs: the row goes with the event.
	// The close waits for a held read of all three lists: the page reads
	// them again only once its last read ended, so none that began before
	// the hold is still in flight to answer after the close.
	if !eval[bool](pg, holdLists) {
		t.Fatal("could not hold the page's list reads")
	}
	pg.waitFor(10*time.Second, "a held read of the three lists", `window.fencerHeld >= 3`)
	closed := postJSON[wire.SessionCloseResponse](t, f, fmt.Sprintf("/v1/sessions/%d/close", ss.Session), fmt.Sprintf(`{"lease":%q}`, ss.Lease))
	if len(closed.Released) != 3 {
		t.Fatalf("the close released %v, want the three grants", closed.Released)
	}
	closedAt := time.Now()
	pg.waitFor(2*time.Second, "the sessions view to empty from the session_closed event", `document.querySelectorAll("#sessions tbody tr").length === 0 && !document.querySelector("#sessions-empty").hidden`)
	t.Logf("the closed session left the view %v after the close", time.Since(closedAt).Round(time.Millisecond))
	pg.waitFor(2*time.Second, "the session_closed event in the feed", fmt.Sprintf(
		`[...document.querySelectorAll('#feed li[data-type="session_closed"]')].some(li => li.textContent.includes(%q))`, sessionName))
	showSessions(pg)
	pg.shot("session-closed")

	// The lists answer again: the locks and the permit are gone too.
	eval[bool](pg, `(() => { window.fetch = window.fencerRealFetch; return true })()`)
	pg.waitFor(10*time.Second, "the session's locks and permit gone", `document.querySelectorAll("#locks tbody tr, #semaphores tbody tr").length === 0 && document.querySelector("#sessions-msg").hidden`)

	// A session that runs out leaves the view with its lock.
	short := postJSON[wire.Session](t, f, "/v1/sessions", `{"holder":"short-lived","ttl_ms":1500}`)
	postJSON[wire.Grant](t, f, "/v1/locks/part.c/acquire", fmt.Sprintf(`{"holder":"short-lived","session":%d,"session_lease":%q}`, short.Session, short.Lease))
	pg.waitFor(3*time.Second, "the short session's row", fmt.Sprintf(`!!document.querySelector('#sessions tr[data-session="%d"] .grant')`, short.Session))
	pg.waitFor(10*time.Second, "the expired session and its lock gone, the event in the feed", fmt.Sprintf(
		`document.querySelectorAll("#sessions tbody tr, #locks tbody tr").length === 0 &&
		 [...document.querySelectorAll('#feed li[data-type="session_expired"]')].some(li => li.textContent.includes("session %d"))`, short.Session))
}
