// Package ui is fencer's dashboard: a page served at /ui/ by every node,
// embedded in the binary, that shows the cluster, its locks, semaphores,
// elections and sessions, and its events live, and lets an operator
// transfer leadership or remove a member.
//
// Why it is built this way:
//   - Plain HTML, CSS and JavaScript modules, embedded with go:embed and
//     served as they are: no build step, no library, nothing fetched at run
//     time (the Content-Security-Policy allows this origin only), so the
//     page works on an air-gapped cluster and reads in one sitting.
//   - The page holds no data and no secrets: it is open (no token needed to
//     load it) and reads the API with the caller's bearer token, so it can
//     never show more than the token's role may read; the API filters.
//   - The events stream is read with fetch(), not EventSource, which cannot
//     send an Authorization header; the token would otherwise have to travel
//     in the URL (logged by proxies) or in a cookie (which a cross-site
//     request would carry). static/sse.js parses the stream and resumes
//     with Last-Event-ID, as EventSource would.
//   - A browser cannot ask the other members (other origins): the serving
//     node gathers their views (GET /v1/cluster/members).
package ui

import (
	"embed"
	"io/fs"
	"net/http"
)

//go:embed static
var static embed.FS

// Files are the dashboard's files, rooted at the page's directory.
func Files() fs.FS {
	sub, err := fs.Sub(static, "static")
	if err != nil {
		panic(err) // the embedded directory is always there
	}
	return sub
}

// contentSecurityPolicy lets the page load and connect to its own origin
// only, and never be framed.
const contentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
	"connect-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"

// Handler serves the dashboard's files under prefix (for instance "/ui"):
// prefix itself redirects to prefix + "/".
func Handler(prefix string) http.Handler {
	files := http.StripPrefix(prefix, http.FileServerFS(Files()))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		if r.URL.Path == prefix {
			http.Redirect(w, r, prefix+"/", http.StatusMovedPermanently)
			return
		}
		h := w.Header()
		h.Set("Content-Security-Policy", contentSecurityPolicy)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("X-Frame-Options", "DENY")
		// The files change with the binary: revalidate on every load.
		h.Set("Cache-Control", "no-cache")
		files.ServeHTTP(w, r)
	})
}
