package uitest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	tc "github.com/fencer-io/fencer/test/testcluster"
)

// skipEnv skips the browser tests; only this, never a missing browser, does.
const skipEnv = "FENCER_SKIP_BROWSER_TESTS"

// chromiumPath finds Chromium: FENCER_CHROMIUM, else chromium (Debian's
// package, which scripts/ensure-chromium.sh installs), chromium-browser or
// google-chrome on PATH. Without one the test fails, unless skipEnv=1.
func chromiumPath(t *testing.T) string {
	t.Helper()
	if os.Getenv(skipEnv) == "1" {
		t.Skipf("%s=1: browser tests skipped", skipEnv)
	}
	if p := os.Getenv("FENCER_CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Fatalf("no Chromium found for the browser tests: run scripts/ensure-chromium.sh (make test does), set FENCER_CHROMIUM, or set %s=1 to skip them", skipEnv)
	return ""
}

// artifactsDir is where screenshots go: artifacts/ui/ at the repository's
// root (gitignored), or FENCER_UI_ARTIFACTS.
func artifactsDir(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("FENCER_UI_ARTIFACTS")
	if dir == "" {
		dir = filepath.Join("..", "..", "artifacts", "ui")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// page is one browser tab on the dashboard.
type page struct {
	t   *testing.T
	ctx context.Context

	mu       sync.Mutex
	problems []string // exceptions and CSP violations the page reported
}

// openPage starts a headless Chromium (one per test, so that tests share no
// session storage) with a laptop-sized window and opens url.
func openPage(t *testing.T, url string) *page {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromiumPath(t)),
		chromedp.NoSandbox, // tests run as root in CI containers
		chromedp.Flag("disable-gpu", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.WindowSize(1440, 1000),
	)
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(func() { cancel(); cancelAlloc() })
	p := &page{t: t, ctx: ctx}
	messages := chromedp.Console(ctx)
	go func() {
		for m, err := range messages {
			if err != nil {
				return
			}
			// Failed requests (a killed node, a 401) are logged by the
			// browser and are expected; a script error or a blocked
			// resource is a broken page.
			if m.IsException() || strings.Contains(m.Text, "Content Security Policy") {
				p.mu.Lock()
				p.problems = append(p.problems, m.String())
				p.mu.Unlock()
			}
		}
	}()
	p.do(chromedp.Navigate(url))
	t.Cleanup(p.checkProblems)
	return p
}

func (p *page) checkProblems() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, m := range p.problems {
		p.t.Errorf("the page reported: %s", m)
	}
}

// do runs browser actions, failing the test on an error.
func (p *page) do(actions ...chromedp.Action[chromedp.Void]) {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(p.ctx, 15*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, actions...); err != nil {
		p.t.Fatalf("browser: %v", err)
	}
}

// eval evaluates a JavaScript expression in the page; an error (the page is
// not ready, say) gives the zero value.
func eval[T any](p *page, expr string) T {
	ctx, cancel := context.WithTimeout(p.ctx, 5*time.Second)
	defer cancel()
	v, _ := chromedp.Run(ctx, chromedp.Evaluate[T](expr))
	return v
}

// text is the text of the first element sel matches, "" when none does.
func (p *page) text(sel string) string {
	return strings.TrimSpace(eval[string](p, fmt.Sprintf(`(document.querySelector(%q) || {}).textContent || ""`, sel)))
}

// visible reports whether sel matches an element that is displayed.
func (p *page) visible(sel string) bool {
	return eval[bool](p, fmt.Sprintf(`(() => { const e = document.querySelector(%q); return !!e && e.offsetParent !== null })()`, sel))
}

func (p *page) count(sel string) int {
	return eval[int](p, fmt.Sprintf(`document.querySelectorAll(%q).length`, sel))
}

// waitFor polls a JavaScript condition until it is true or timeout passes.
func (p *page) waitFor(timeout time.Duration, what, cond string) {
	p.t.Helper()
	tc.Poll(p.t, timeout, what, func() bool { return eval[bool](p, cond) })
}

// click clicks the element sel matches, as a mouse does. It is never
// repeated: a click that was dispatched and then reported an error could
// land twice (on a dialog it opened, say).
func (p *page) click(sel string) { p.t.Helper(); p.do(chromedp.Click(chromedp.CSS(sel))) }

// clickRow clicks in a table row the page may rebuild between finding the
// element and clicking it ("could not find node"): that is retried, as
// long as the click did nothing visible (done is false).
func (p *page) clickRow(sel, done string) {
	p.t.Helper()
	tc.Poll(p.t, 10*time.Second, "a click on "+sel, func() bool {
		if eval[bool](p, done) {
			return true
		}
		ctx, cancel := context.WithTimeout(p.ctx, 10*time.Second)
		defer cancel()
		chromedp.Do(ctx, chromedp.Click(chromedp.CSS(sel)))
		return eval[bool](p, done)
	})
}

func (p *page) typeInto(sel, s string) {
	p.t.Helper()
	if !eval[bool](p, fmt.Sprintf(`(() => { const e = document.querySelector(%q); if (!e) return false; e.value = ""; return true })()`, sel)) {
		p.t.Fatalf("no %s to type into", sel)
	}
	p.do(chromedp.SendKeys(chromedp.CSS(sel), s))
}

// shot writes a PNG of the viewport to artifacts/ui/name.png.
func (p *page) shot(name string) {
	p.t.Helper()
	p.shotTo(filepath.Join(artifactsDir(p.t), name+".png"))
}

func (p *page) shotTo(path string) {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(p.ctx, 15*time.Second)
	defer cancel()
	png, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
	if err != nil {
		p.t.Fatalf("screenshot %s: %v", path, err)
	}
	if err := os.WriteFile(path, png, 0o644); err != nil {
		p.t.Fatal(err)
	}
}

// lowContrast lists the visible text whose colour has less than WCAG AA's
// contrast with the background behind it: 4.5:1, or 3:1 for large text
// (24px, or 18.66px bold). The background is the first opaque one among the
// element and its ancestors.
const lowContrast = `(() => {
  const rgb = (c) => (c.match(/[\d.]+/g) || []).map(Number);
  const lum = ([r, g, b]) => {
    const f = (v) => { v /= 255; return v <= 0.03928 ? v / 12.92 : Math.pow((v + 0.055) / 1.055, 2.4); };
    return 0.2126 * f(r) + 0.7152 * f(g) + 0.0722 * f(b);
  };
  const background = (el) => {
    for (let e = el; e; e = e.parentElement) {
      const c = rgb(getComputedStyle(e).backgroundColor);
      if (c.length === 3 || (c.length === 4 && c[3] === 1)) return c.slice(0, 3);
    }
    return [255, 255, 255];
  };
  const out = [];
  const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  for (let n = walker.nextNode(); n; n = walker.nextNode()) {
    const el = n.parentElement;
    if (!n.textContent.trim() || !el || !el.checkVisibility() || el.closest(".sr-only")) continue;
    const st = getComputedStyle(el);
    const fg = lum(rgb(st.color).slice(0, 3)), bg = lum(background(el));
    const ratio = (Math.max(fg, bg) + 0.05) / (Math.min(fg, bg) + 0.05);
    const size = parseFloat(st.fontSize), bold = Number(st.fontWeight) >= 700;
    const need = size >= 24 || (bold && size >= 18.66) ? 3 : 4.5;
    if (ratio < need) out.push(n.textContent.trim().slice(0, 30) + " " + ratio.toFixed(2) + " < " + need);
  }
  return out;
})()`
