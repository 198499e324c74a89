package proxy

import (
	"bufio"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fencer-io/fencer/api/wire"
)

// python is the interpreter of the upstream: $PYTHON, else Debian's, else
// the first on PATH. The upstream needs the standard library only.
func python(t testing.TB) string {
	t.Helper()
	for _, p := range []string{os.Getenv("PYTHON"), "/usr/bin/python3"} {
		if p != "" {
			if _, err := os.Stat(p); err == nil {
				return p
			}
		}
	}
	p, err := exec.LookPath("python3")
	if err != nil {
		t.Fatalf("the proxy's tests need python3 for their upstream: %v", err)
	}
	return p
}

// upstream is testdata/upstream.py running as a process of its own.
type upstream struct {
	URL string
	cmd *exec.Cmd
}

// startUpstream starts the Python upstream; maxDelayMS pauses each write by
// up to that many milliseconds before it is applied.
func startUpstream(t testing.TB, maxDelayMS int) *upstream {
	t.Helper()
	cmd := exec.Command(python(t), filepath.Join("testdata", "upstream.py"), strconv.Itoa(maxDelayMS))
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	u := &upstream{cmd: cmd}
	t.Cleanup(u.stop)
	ready := make(chan string, 1)
	go func() {
		line, _ := bufio.NewReader(out).ReadString('\n')
		ready <- line
		_, _ = io.Copy(io.Discard, out)
	}()
	select {
	case line := <-ready:
		port, ok := strings.CutPrefix(strings.TrimSpace(line), "listening ")
		if !ok {
			t.Fatalf("upstream said %q, want \"listening PORT\"", line)
		}
		u.URL = "http://127.0.0.1:" + port
	case <-time.After(20 * time.Second):
		t.Fatal("the Python upstream did not start within 20s")
	}
	return u
}

func (u *upstream) stop() {
	if u.cmd.Process != nil {
		_ = u.cmd.Process.Kill()
		_ = u.cmd.Wait()
	}
}

// appliedWrite is one entry of the upstream's log.
type appliedWrite struct {
	Method, Path, Token, Body string
}

func (u *upstream) writes(t testing.TB) []appliedWrite {
	t.Helper()
	resp, err := http.Get(u.URL + "/_writes")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var ws []appliedWrite
	if err := json.NewDecoder(resp.Body).Decode(&ws); err != nil {
		t.Fatal(err)
	}
	return ws
}

// running is a proxy serving on loopback over its own mark store.
type running struct {
	URL   string
	srv   *httptest.Server
	marks *Marks
}

// startProxy opens dir's mark store for cfg.KeyPattern and serves a proxy
// over it; stop it (or let the test's cleanup) to release the store.
func startProxy(t testing.TB, dir string, cfg Config) *running {
	t.Helper()
	marks, err := OpenMarks(filepath.Join(dir, "marks.db"), cfg.KeyPattern)
	if err != nil {
		t.Fatal(err)
	}
	p, err := New(marks, cfg)
	if err != nil {
		marks.Close()
		t.Fatal(err)
	}
	r := &running{srv: httptest.NewServer(p), marks: marks}
	r.URL = r.srv.URL
	t.Cleanup(r.stop)
	return r
}

func (r *running) stop() {
	if r.srv != nil {
		r.srv.Close()
		r.marks.Close()
		r.srv = nil
	}
}

func mustURL(t testing.TB, s string) *url.URL {
	t.Helper()
	u, err := url.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// answer is a response read in full; Err is its body as a wire.Error, when
// it is one.
type answer struct {
	Status int
	Body   string
	Header http.Header
	Err    wire.Error
}

// send makes a request with headers given as name, value pairs.
func send(t testing.TB, method, url, body string, headers ...string) answer {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Add(headers[i], headers[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	a := answer{Status: resp.StatusCode, Body: string(b), Header: resp.Header}
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
		_ = json.Unmarshal(b, &a.Err)
	}
	return a
}
