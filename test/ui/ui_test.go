// Package uitest drives the dashboard (/ui/, internal/ui) in a real
// headless Chromium against real fencer processes, and asserts what a
// person would see: the leader and term, a lock with its token, the new
// leader after the old one is killed, the sign-in prompt, what each role is
// offered, a leadership transfer made from the page, and a session with
// its grants, gone when it is closed or runs out. Each state is
// written as a PNG under artifacts/ui/. Every wait polls with a deadline.
//
// The tests need Chromium (scripts/ensure-chromium.sh installs Debian's);
// FENCER_SKIP_BROWSER_TESTS=1 skips them, and nothing else does.
package uitest

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"image"
	"image/color"
	"image/draw"
	"image/png"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"

	"github.com/fencer-io/fencer/api/wire"
	tc "github.com/fencer-io/fencer/test/testcluster"
)

var readmeShot = flag.Bool("ui.readme", false, "also write the README's screenshot, docs/img/dashboard.png")

func acquire(t *testing.T, p *proc, token, lock, body string) wire.Grant {
	t.Helper()
	code, resp := request(p, http.MethodPost, "/v1/locks/"+lock+"/acquire", token, body)
	var g wire.Grant
	if code != http.StatusOK || json.Unmarshal([]byte(resp), &g) != nil {
		t.Fatalf("acquire %s: %d %s", lock, code, resp)
	}
	return g
}

func release(t *testing.T, p *proc, token, lock string, g wire.Grant) {
	t.Helper()
	body := fmt.Sprintf(`{"lease":%q,"token":%d}`, g.Lease, g.Token)
	if code, resp := request(p, http.MethodPost, "/v1/locks/"+lock+"/release", token, body); code != http.StatusOK {
		t.Fatalf("release %s: %d %s", lock, code, resp)
	}
}

// follower returns a running node that does not lead.
func follower(c *procCluster, leader string) *proc {
	for _, p := range c.nodes {
		if p.id != leader {
			return p
		}
	}
	c.t.Fatal("no follower")
	return nil
}

// showsLeader is a condition: the page names this leader and term.
func showsLeader(leader string, term uint64) string {
	return fmt.Sprintf(`document.querySelector("#leader").dataset.leader === %q && document.querySelector("#term").textContent === "%d"`, leader, term)
}

// The page, opened on a follower, shows the cluster as GET /v1/cluster
// does, a lock acquired through the API within 2 s with its token, the lock
// gone when released, and, without a reload, the new leader within 10 s of
// the old one's SIGKILL.
func TestDashboardFollowsTheCluster(t *testing.T) {
	chromiumPath(t)
	c := startCluster(t, 3)
	st := c.agreedLeader(c.nodes[0], "", "", 20*time.Second)
	f := follower(c, st.Leader)
	pg := openPage(t, f.url()+"/ui/")

	// The leader and term are those GET /v1/cluster answers on the node
	// that served the page.
	tc.Poll(t, 5*time.Second, "the page to show GET /v1/cluster's leader and term", func() bool {
		st, ok := c.status(f, "")
		return ok && eval[bool](pg, showsLeader(st.Leader, st.Term))
	})
	if got := pg.text("#node"); got == "" || got[:len(f.id)] != f.id {
		t.Errorf("the page says it is from %q, want %s", got, f.id)
	}
	pg.waitFor(5*time.Second, "three healthy members, one the leader",
		`document.querySelectorAll("#members tbody tr").length === 3 &&
		 [...document.querySelectorAll("#members .health .badge")].every(b => b.textContent === "healthy") &&
		 document.querySelectorAll("#members .badge.leader").length === 1`)
	if pg.visible("#login") {
		t.Error("an open cluster's page asks for a token")
	}
	// Every control has a name a screen reader can say.
	if unnamed := eval[[]string](pg, `[...document.querySelectorAll("input, button")].filter(e =>
		!(e.labels && e.labels.length) && !e.getAttribute("aria-label") && !e.textContent.trim()).map(e => e.outerHTML)`); len(unnamed) > 0 {
		t.Errorf("controls without a label: %v", unnamed)
	}
	pg.shot("cluster")
	if low := eval[[]string](pg, lowContrast); len(low) > 0 {
		t.Errorf("text below WCAG AA contrast in the light scheme: %q", low)
	}
	pg.do(chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		_, err := cdp.Call(ctx, tg, emulation.SetEmulatedMedia, emulation.SetEmulatedMediaParams{Features: []*emulation.MediaFeature{{Name: "prefers-color-scheme", Value: "dark"}}})
		return err
	}))
	pg.waitFor(5*time.Second, "the dark scheme", `matchMedia("(prefers-color-scheme: dark)").matches`)
	if low := eval[[]string](pg, lowContrast); len(low) > 0 {
		t.Errorf("text below WCAG AA contrast in the dark scheme: %q", low)
	}
	pg.shot("dark")
	pg.do(chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		_, err := cdp.Call(ctx, tg, emulation.SetEmulatedMedia, emulation.SetEmulatedMediaParams{})
		return err
	}))

	// On a phone the page fits the screen's width (tables scroll inside
	// their cards).
	pg.do(chromedp.EmulateViewport(390, 844, chromedp.EmulateScale(2), chromedp.EmulateMobile, chromedp.EmulateTouch))
	pg.waitFor(5*time.Second, "the page to fit a phone's width", `document.documentElement.clientWidth === 390 && document.documentElement.scrollWidth <= 390`)
	pg.shot("phone")
	pg.do(chromedp.EmulateReset())

	// The cluster keeps a grant history from when its leader sets it, once
	// every member has registered: the grant below must come after.
	tc.Poll(t, 15*time.Second, "the cluster's grant history", func() bool {
		code, body := get(f, "/v1/tokens/1", "")
		return code != http.StatusNotFound || !strings.Contains(body, `"no_history"`)
	})

	// A lock acquired through the API appears with its holder and token.
	g := acquire(t, f, "", "ui.demo", `{"holder":"ui-test","ttl_ms":30000}`)
	acquired := time.Now()
	row := `#locks tr[data-lock="ui.demo"]`
	pg.waitFor(2*time.Second, "the lock's row with its token and holder", fmt.Sprintf(
		`(() => { const r = document.querySelector(%q); return !!r && r.querySelector(".token").textContent === "%d" && r.querySelector(".holder").textContent === "ui-test" })()`,
		row, g.Token))
	t.Logf("the acquired lock was shown after %v", time.Since(acquired).Round(time.Millisecond))
	// Its time left counts down between reads.
	first := pg.text(row + " .ttl-text")
	pg.waitFor(2*time.Second, "the lock's TTL to count down", fmt.Sprintf(`(document.querySelector(%q) || {}).textContent !== %q`, row+" .ttl-text", first))
	pg.waitFor(2*time.Second, "the acquired event in the feed",
		fmt.Sprintf(`[...document.querySelectorAll('#feed li[data-type="acquired"]')].some(li => li.textContent.includes("ui.demo") && li.textContent.includes("t%d"))`, g.Token))
	pg.shot("lock-held")

	// Whose token is it? The box answers from GET /v1/tokens/{token}.
	pg.typeInto("#token-lookup", strconv.FormatUint(g.Token, 10))
	pg.click(`#token-form button[type="submit"]`)
	if code, body := get(f, fmt.Sprintf("/v1/tokens/%d", g.Token), ""); code != http.StatusOK {
		t.Fatalf("GET /v1/tokens/%d on %s: %d %s", g.Token, f.id, code, body)
	}
	pg.waitFor(5*time.Second, "the token box to name the lock and holder",
		`(() => { const a = document.querySelector("#token-result"); return !!a && a.textContent.includes("ui.demo") && a.textContent.includes("ui-test") && a.textContent.includes("still held") })()`)
	// A click on the lock shows its history.
	pg.clickRow(row+" .lock-name", `document.querySelector("#history-lock").value === "ui.demo"`)
	if code, _ := get(f, "/v1/locks/ui.demo/history", ""); code == http.StatusNotFound {
		pg.waitFor(5*time.Second, "the history panel to say histories are not served", `document.querySelector("#history-answer").textContent.includes("predates GET /v1/locks/{name}/history")`)
	} else {
		pg.waitFor(5*time.Second, "the lock's history with its grant",
			fmt.Sprintf(`!!document.querySelector('#history-table tr[data-token="%d"]')`, g.Token))
	}
	pg.shot("lookups")

	// Released, it is gone.
	release(t, f, "", "ui.demo", g)
	released := time.Now()
	pg.waitFor(2*time.Second, "the released lock's row to go", fmt.Sprintf(`!document.querySelector(%q)`, row))
	t.Logf("the released lock was gone after %v", time.Since(released).Round(time.Millisecond))

	if *readmeShot {
		readmeScreenshot(t, f)
	}

	// The leader is killed; the page, not reloaded, shows its successor.
	if !eval[bool](pg, `(window.fencerTestMark = true)`) {
		t.Fatal("could not mark the page")
	}
	old := c.node(st.Leader)
	c.kill(old)
	killed := time.Now()
	tc.Poll(t, 10*time.Second, "the page to show a new leader, the one GET /v1/cluster names", func() bool {
		st, ok := c.status(f, "")
		return ok && st.Leader != "" && st.Leader != old.id && eval[bool](pg, showsLeader(st.Leader, st.Term))
	})
	t.Logf("the page showed the new leader %v after the SIGKILL", time.Since(killed).Round(time.Millisecond))
	if !eval[bool](pg, `window.fencerTestMark === true`) {
		t.Error("the page was reloaded")
	}
	pg.waitFor(5*time.Second, "the killed member shown unreachable",
		fmt.Sprintf(`(document.querySelector('#members tr[data-member="%s"] .health') || {}).textContent === "unreachable"`, old.id))
	pg.shot("new-leader")
}

// readmeScreenshot writes docs/img/dashboard.png: a page opened on f that
// watched a few locks, an election and a semaphore being taken (go test
// ./test/ui -run TestDashboardFollowsTheCluster -ui.readme).
func readmeScreenshot(t *testing.T, f *proc) {
	t.Helper()
	pg := openPage(t, f.url()+"/ui/")
	pg.do(chromedp.EmulateViewport(1280, 900))
	pg.waitFor(5*time.Second, "the page", `document.querySelectorAll("#members tbody tr").length === 3 && document.querySelector("#events-state").dataset.state === "live"`)
	var grants []wire.Grant
	for i, h := range []string{"builder-1", "builder-2"} {
		grants = append(grants, acquire(t, f, "", fmt.Sprintf("jobs.build-%d", i+1), fmt.Sprintf(`{"holder":%q,"ttl_ms":60000,"lock_delay_ms":2000}`, h)))
	}
	e := acquire(t, f, "", "election.db-primary", `{"holder":"db-2","ttl_ms":15000}`)
	if code, resp := request(f, http.MethodPost, "/v1/locks/election.db-primary/value", "", fmt.Sprintf(`{"lease":%q,"token":%d,"value":"10.0.0.12:5432"}`, e.Lease, e.Token)); code != http.StatusOK {
		t.Fatalf("value: %d %s", code, resp)
	}
	for _, h := range []string{"crawler-a", "crawler-b"} {
		if code, resp := request(f, http.MethodPost, "/v1/semaphores/crawlers/acquire", "", fmt.Sprintf(`{"holder":%q,"limit":4,"ttl_ms":40000}`, h)); code != http.StatusOK {
			t.Fatalf("permit: %d %s", code, resp)
		}
	}
	release(t, f, "", "jobs.build-2", grants[1])
	acquire(t, f, "", "jobs.build-2", `{"holder":"builder-3","ttl_ms":60000}`)
	pg.waitFor(5*time.Second, "every lock shown", `document.querySelectorAll("#locks tbody tr").length === 3 && document.querySelectorAll("#semaphores tbody tr").length === 1`)
	pg.clickRow(`#locks tr[data-lock="jobs.build-2"] .lock-name`, `document.querySelector("#history-lock").value === "jobs.build-2"`)
	pg.waitFor(5*time.Second, "the new rows' highlight to fade", `document.getAnimations().length === 0`)
	pg.waitFor(5*time.Second, "the history answered", `document.querySelector("#history-answer").textContent.trim() !== "" && !document.querySelector("#history-answer").textContent.includes("Reading")`)
	path := filepath.Join("..", "..", "docs", "img", "dashboard.png")
	pg.shotTo(path)
	// Committed: kept small as a PNG of the 256 commonest colours (a flat
	// page has few; anti-aliased text loses nothing a reader sees).
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	img, err := png.Decode(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := (&png.Encoder{CompressionLevel: png.BestCompression}).Encode(&out, commonestColours(img, 256)); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, out.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("wrote %s (%d KiB)", path, out.Len()>>10)
}

const (
	readerSecret     = "reader-secret-0123456789abcdef"
	jobsReaderSecret = "jobs-reader-secret-0123456789abcdef"
	operatorSecret   = "operator-secret-0123456789abcdef"
)

// aclCluster starts 3 nodes with an ACL file of a reader and an operator
// token (and the cluster secret members need without TLS).
func aclCluster(t *testing.T) *procCluster {
	t.Helper()
	dir := t.TempDir()
	aclFile := filepath.Join(dir, "acl.json")
	secretFile := filepath.Join(dir, "cluster-secret")
	acl := fmt.Sprintf(`{"tokens":[{"name":"dash","secret":%q,"role":"reader","keys":["*"]},{"name":"jobs-dash","secret":%q,"role":"reader","locks":["jobs."],"keys":["*"]},{"name":"ops","secret":%q,"role":"operator","keys":["*"]}]}`, readerSecret, jobsReaderSecret, operatorSecret)
	if err := os.WriteFile(aclFile, []byte(acl), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(secretFile, []byte("cluster-secret-0123456789abcdef0123456789\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return startCluster(t, 3, "--acl-file", aclFile, "--cluster-secret-file", secretFile)
}

// signIn types a token into the prompt and submits it.
func signIn(pg *page, token string) {
	pg.t.Helper()
	pg.waitFor(5*time.Second, "the sign-in prompt", `!document.querySelector("#login").hidden`)
	pg.typeInto("#token-input", token)
	pg.click(`#login-form button[type="submit"]`)
}

// With an ACL: without a token the page asks for one and shows nothing of
// the cluster; a token the ACL does not know is refused with a message; a
// reader sees the cluster and is offered no operator action; a reader of
// some lock prefixes is shown nothing of other locks; an operator
// transfers leadership from the page, after confirming, and the cluster
// does it.
func TestDashboardWithACL(t *testing.T) {
	chromiumPath(t)
	c := aclCluster(t)
	st := c.agreedLeader(c.nodes[0], operatorSecret, "", 20*time.Second)
	f := follower(c, st.Leader)
	pg := openPage(t, f.url()+"/ui/")

	// No token: the prompt, and no data.
	pg.waitFor(5*time.Second, "the sign-in prompt", `!document.querySelector("#login").hidden && document.querySelector("#dash").hidden`)
	if pg.visible("#dash") || pg.text("#leader") != "–" {
		t.Errorf("without a token the page shows the cluster (leader %q)", pg.text("#leader"))
	}
	pg.shot("acl-prompt")

	// A token the ACL does not have: refused, said so, not kept.
	signIn(pg, "not-a-known-token-0123456789")
	pg.waitFor(5*time.Second, "the refusal of an unknown token", `document.querySelector("#login-error").textContent.includes("refused this token (401")`)
	if v := eval[string](pg, `String(sessionStorage.getItem("fencer.token"))`); v != "null" {
		t.Errorf("a refused token was kept in sessionStorage: %q", v)
	}
	pg.shot("acl-refused")

	// A reader: the cluster, and no operator action anywhere.
	signIn(pg, readerSecret)
	pg.waitFor(5*time.Second, "the reader's dashboard", `document.querySelector("#who-role").textContent === "reader" && document.querySelectorAll("#members tbody tr").length === 3`)
	tc.Poll(t, 5*time.Second, "the reader to be shown GET /v1/cluster's leader and term", func() bool {
		st, ok := c.status(f, operatorSecret)
		return ok && eval[bool](pg, showsLeader(st.Leader, st.Term))
	})
	if n := pg.count("button.op, #transfer-leader, #members button"); n != 0 {
		t.Errorf("a reader is offered %d operator buttons", n)
	}
	if v := eval[string](pg, `String(localStorage.length) + " " + document.cookie`); v != "0 " {
		t.Errorf("the token left sessionStorage: localStorage and cookies are %q", v)
	}
	pg.shot("acl-reader")

	// Signing out forgets the token, and what it was shown.
	pg.click("#sign-out")
	pg.waitFor(5*time.Second, "the prompt after signing out", `!document.querySelector("#login").hidden && sessionStorage.getItem("fencer.token") === null`)
	if n := pg.count("#members tbody tr, #locks tbody tr, #feed li"); n != 0 || pg.text("#leader") != "–" {
		t.Errorf("after signing out the page keeps %d rows and the leader %q for the next token", n, pg.text("#leader"))
	}

	// A reader of the jobs. locks sees those, in the table, the feed, the
	// history and the token box, and nothing of the others.
	signIn(pg, jobsReaderSecret)
	pg.waitFor(5*time.Second, "the jobs reader's dashboard", `document.querySelector("#who-role").textContent === "reader" && document.querySelector("#events-state").dataset.state === "live"`)
	secret := acquire(t, f, operatorSecret, "secret.plan", `{"holder":"hidden-holder","ttl_ms":30000}`)
	job := acquire(t, f, operatorSecret, "jobs.report", `{"holder":"report-writer","ttl_ms":30000}`)
	pg.waitFor(5*time.Second, "the jobs lock in the table and the feed", fmt.Sprintf(
		`!!document.querySelector('#locks tr[data-lock="jobs.report"]') && document.querySelector("#feed").textContent.includes("t%d")`, job.Token))
	if n := pg.count(`#locks tr[data-lock="secret.plan"]`); n != 0 || eval[bool](pg, `document.body.textContent.includes("secret.plan") || document.body.textContent.includes("hidden-holder")`) {
		t.Errorf("a reader of jobs. is shown the lock secret.plan")
	}
	pg.typeInto("#token-lookup", strconv.FormatUint(secret.Token, 10))
	pg.click(`#token-form button[type="submit"]`)
	pg.waitFor(5*time.Second, "the token box to refuse another prefix's token", `document.querySelector("#token-answer").textContent.includes("may not read")`)
	if eval[bool](pg, `document.body.textContent.includes("secret.plan") || document.body.textContent.includes("hidden-holder")`) {
		t.Errorf("the token box shows a reader of jobs. the lock of another prefix: %q", pg.text("#token-answer"))
	}
	pg.shot("acl-prefix-reader")
	pg.click("#sign-out")
	pg.waitFor(5*time.Second, "the prompt after signing out", `!document.querySelector("#login").hidden`)

	// An operator moves the leadership to a member chosen on the page.
	signIn(pg, operatorSecret)
	st = c.agreedLeader(f, operatorSecret, "", 10*time.Second)
	var target *proc
	for _, p := range c.nodes {
		if p.id != st.Leader {
			target = p // any follower; the last one
		}
	}
	button := fmt.Sprintf(`#members tr[data-member="%s"] button[aria-label="Make %s the leader"]`, target.id, target.id)
	pg.waitFor(5*time.Second, "the operator's buttons", fmt.Sprintf(`document.querySelector("#who-role").textContent === "operator" && !!document.querySelector(%q) && !!document.querySelector("#transfer-leader")`, button))
	pg.shot("acl-operator")

	// Cancelled, nothing happens.
	pg.click(button)
	pg.waitFor(5*time.Second, "the confirmation", `document.querySelector("#confirm").open`)
	pg.click("#confirm-cancel")
	pg.waitFor(5*time.Second, "the confirmation closed", `!document.querySelector("#confirm").open`)
	if now, ok := c.status(f, operatorSecret); !ok || now.Leader != st.Leader {
		t.Fatalf("leadership moved without a confirmation: %+v", now)
	}

	// Confirmed, the cluster does it.
	pg.click(button)
	pg.waitFor(5*time.Second, "the confirmation", fmt.Sprintf(`document.querySelector("#confirm").open && document.querySelector("#confirm-text").textContent.includes(%q)`, target.id))
	pg.shot("acl-confirm")
	pg.click("#confirm-ok")
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("the page's banner: %q; the dialog's answer: %q", pg.text("#banner"), eval[string](pg, `document.querySelector("#confirm").returnValue`))
			pg.shot("acl-failed")
		}
	})
	pg.waitFor(5*time.Second, "the page to start the transfer", `document.querySelector("#banner").textContent !== ""`)
	moved := c.agreedLeader(f, operatorSecret, st.Leader, 10*time.Second)
	if moved.Leader != target.id {
		t.Fatalf("leadership went to %s, want %s", moved.Leader, target.id)
	}
	pg.waitFor(5*time.Second, "the page to show the new leader", showsLeader(moved.Leader, moved.Term))
	pg.waitFor(5*time.Second, "the page to say it was done", `document.querySelector("#banner").textContent.includes("Leadership transferred")`)
	pg.shot("acl-transferred")
}

// commonestColours redraws img with a palette of its n commonest colours,
// each pixel the nearest of them.
func commonestColours(img image.Image, n int) *image.Paletted {
	counts := map[color.RGBA]int{}
	r := img.Bounds()
	for y := r.Min.Y; y < r.Max.Y; y++ {
		for x := r.Min.X; x < r.Max.X; x++ {
			counts[color.RGBAModel.Convert(img.At(x, y)).(color.RGBA)]++
		}
	}
	colours := make([]color.RGBA, 0, len(counts))
	for c := range counts {
		colours = append(colours, c)
	}
	sort.Slice(colours, func(i, j int) bool { return counts[colours[i]] > counts[colours[j]] })
	var pal color.Palette
	for _, c := range colours[:min(n, len(colours))] {
		pal = append(pal, c)
	}
	out := image.NewPaletted(r, pal)
	draw.Draw(out, r, img, r.Min, draw.Src)
	return out
}
