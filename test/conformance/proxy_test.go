package conformance

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"syscall"
	"testing"
	"time"
)

// newTestProxy is a proxy in front of an HTTP server whose handler answers
// with its own address in the body and the Fencer-Leader header, and
// streams on /v1/events until the request ends.
func newTestProxy(t *testing.T) (*Proxy, *httptest.Server) {
	t.Helper()
	var srv *httptest.Server
	srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		addr := srv.Listener.Addr().String()
		if r.URL.Path == "/v1/events" {
			w.Header().Set("Content-Type", "text/event-stream")
			fmt.Fprintf(w, "data: %s\n\n", addr)
			w.(http.Flusher).Flush()
			<-r.Context().Done()
			return
		}
		w.Header().Set("Fencer-Leader", addr)
		fmt.Fprintf(w, `{"leader":%q}`, addr)
	}))
	t.Cleanup(srv.Close)
	p, err := NewProxy(srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	if err := p.Rewrite(map[string]string{srv.Listener.Addr().String(): p.Addr()}); err != nil {
		t.Fatal(err)
	}
	return p, srv
}

func get(hc *http.Client, addr, path string) (string, http.Header, error) {
	resp, err := hc.Get("http://" + addr + path)
	if err != nil {
		return "", nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return string(b), resp.Header, err
}

// TestProxyPassesAndRewrites: answers pass through with the member's
// address replaced by the proxy's, in headers and bodies.
func TestProxyPassesAndRewrites(t *testing.T) {
	p, _ := newTestProxy(t)
	body, h, err := get(&http.Client{}, p.Addr(), "/v1/cluster")
	if err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf(`{"leader":%q}`, p.Addr())
	if body != want || h.Get("Fencer-Leader") != p.Addr() {
		t.Fatalf("body %s, Fencer-Leader %q; want %s and %s", body, h.Get("Fencer-Leader"), want, p.Addr())
	}
}

// TestProxyDead: a dead proxy resets open connections and new ones; Alive
// heals it.
func TestProxyDead(t *testing.T) {
	p, _ := newTestProxy(t)
	conn, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "GET /v1/events HTTP/1.1\r\nHost: x\r\n\r\n")
	r := bufio.NewReader(conn)
	if _, err := r.ReadString('\n'); err != nil {
		t.Fatal(err)
	}
	poll(t, 5*time.Second, "the stream counted as a watch", func() bool { _, w := p.Open(); return w == 1 })
	p.Dead()
	if _, err := io.ReadAll(r); !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("the open stream after Dead: %v, want a reset", err)
	}
	if _, _, err := get(&http.Client{}, p.Addr(), "/v1/cluster"); err == nil {
		t.Fatal("a new request through a dead proxy succeeded")
	}
	p.Alive()
	if _, _, err := get(&http.Client{}, p.Addr(), "/v1/cluster"); err != nil {
		t.Fatalf("after Alive: %v", err)
	}
}

// TestProxyDelayAndBlackhole: a delayed answer arrives no sooner than the
// delay; a blackholed request gets nothing.
func TestProxyDelayAndBlackhole(t *testing.T) {
	p, _ := newTestProxy(t)
	p.DelayAnswers(300 * time.Millisecond)
	start := time.Now()
	if _, _, err := get(&http.Client{}, p.Addr(), "/v1/cluster"); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d < 300*time.Millisecond {
		t.Fatalf("a delayed answer came after %v", d)
	}
	p.Blackhole()
	_, _, err := get(&http.Client{Timeout: 500 * time.Millisecond}, p.Addr(), "/v1/cluster")
	if err == nil || !strings.Contains(err.Error(), "Timeout") {
		t.Fatalf("a request through a blackhole: %v, want a timeout", err)
	}
}
