package ui

import (
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
)

func serve(t *testing.T, method, path string) *http.Response {
	t.Helper()
	rec := httptest.NewRecorder()
	Handler("/ui").ServeHTTP(rec, httptest.NewRequest(method, path, nil))
	return rec.Result()
}

// The page, its modules and its stylesheet are served with the types a
// browser insists on (a module script with another type is not run), the
// security headers, and nothing outside the embedded directory.
func TestHandler(t *testing.T) {
	for path, ctype := range map[string]string{
		"/ui/":          "text/html",
		"/ui/app.js":    "text/javascript",
		"/ui/sse.js":    "text/javascript",
		"/ui/style.css": "text/css",
		"/ui/icon.svg":  "image/svg+xml",
	} {
		resp := serve(t, http.MethodGet, path)
		if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), ctype) {
			t.Errorf("GET %s: %d %s, want 200 %s", path, resp.StatusCode, resp.Header.Get("Content-Type"), ctype)
		}
		for _, h := range []string{"Content-Security-Policy", "X-Content-Type-Options", "X-Frame-Options", "Referrer-Policy"} {
			if resp.Header.Get(h) == "" {
				t.Errorf("GET %s: no %s", path, h)
			}
		}
	}
	if resp := serve(t, http.MethodGet, "/ui"); resp.StatusCode != http.StatusMovedPermanently || resp.Header.Get("Location") != "/ui/" {
		t.Errorf("GET /ui: %d %q", resp.StatusCode, resp.Header.Get("Location"))
	}
	if resp := serve(t, http.MethodPost, "/ui/"); resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("POST /ui/: %d", resp.StatusCode)
	}
	for _, path := range []string{"/ui/../ui.go", "/ui/%2e%2e/ui.go", "/ui/nothing.js", "/ui/static/app.js"} {
		resp := serve(t, http.MethodGet, path)
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode == http.StatusOK && strings.Contains(string(body), "package ui") {
			t.Errorf("GET %s served a file outside the page's directory", path)
		}
	}
}

// Everything the page loads is one of its own files: no CDN, no other
// origin, no inline script or style (the CSP would block them).
func TestNothingFetchedFromElsewhere(t *testing.T) {
	remote := regexp.MustCompile(`(?i)(https?:)?//[a-z0-9.-]+\.[a-z]{2,}`)
	inline := regexp.MustCompile(`(?i)<script>|<style|\sstyle="|\son[a-z]+="`)
	err := fs.WalkDir(Files(), ".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := fs.ReadFile(Files(), path)
		if err != nil {
			return err
		}
		text := string(b)
		if strings.HasSuffix(path, ".svg") {
			text = strings.ReplaceAll(text, "http://www.w3.org/2000/svg", "")
		}
		if m := remote.FindString(text); m != "" {
			t.Errorf("%s refers to another origin: %q", path, m)
		}
		if strings.HasSuffix(path, ".html") {
			if m := inline.FindString(text); m != "" {
				t.Errorf("%s has inline script or style, which the CSP blocks: %q", path, m)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
