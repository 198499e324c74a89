package main

import (
	"bufio"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fencer-io/fencer/api/wire"
	tc "github.com/fencer-io/fencer/test/testcluster"
)

// startLine starts a command and returns the first line it prints that
// begins with prefix, with the rest of its output drained.
func startLine(t *testing.T, cmd *exec.Cmd, prefix string) string {
	t.Helper()
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	lines := make(chan string, 1)
	go func() {
		r := bufio.NewReader(out)
		for {
			line, err := r.ReadString('\n')
			if strings.HasPrefix(line, prefix) {
				lines <- strings.TrimSpace(strings.TrimPrefix(line, prefix))
				break
			}
			if err != nil {
				close(lines)
				return
			}
		}
		_, _ = io.Copy(io.Discard, r)
	}()
	select {
	case line, ok := <-lines:
		if !ok {
			t.Fatalf("%s exited without printing %q", cmd.Path, prefix)
		}
		return line
	case <-time.After(30 * time.Second):
		t.Fatalf("%s printed no %q within 30s", cmd.Path, prefix)
	}
	return ""
}

func putFenced(t *testing.T, url, token string, headers ...string) (int, wire.Error) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPut, url, strings.NewReader("v"))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set(wire.HeaderToken, token)
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("PUT %s: %v", url, err)
	}
	defer resp.Body.Close()
	var e wire.Error
	_ = json.NewDecoder(resp.Body).Decode(&e)
	return resp.StatusCode, e
}

// TestFenceProxyMarkSurvivesKill runs "fencer fence-proxy" in front of the
// Python upstream of fence/proxy's tests and kills it (SIGKILL) twice: after
// an accepted write, whose mark must survive, and while a write is at the
// upstream with its answer pending, which must count as made: a restarted
// proxy refuses a token below it.
func TestFenceProxyMarkSurvivesKill(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	python := "/usr/bin/python3"
	if _, err := os.Stat(python); err != nil {
		if python, err = exec.LookPath("python3"); err != nil {
			t.Fatalf("the upstream needs python3: %v", err)
		}
	}
	upPort := startLine(t, exec.Command(python, filepath.Join("..", "..", "fence", "proxy", "testdata", "upstream.py")), "listening ")
	upstream := "http://127.0.0.1:" + upPort
	bin := tc.BuildFencer(t, t.TempDir())
	dir := t.TempDir()
	var proxyCmd *exec.Cmd
	start := func() string {
		proxyCmd = exec.Command(bin, "fence-proxy", "--upstream", upstream, "--data-dir", dir,
			"--listen", "127.0.0.1:0", "--key-pattern", "/docs/{id}")
		addr := startLine(t, proxyCmd, "fencer fence-proxy listening on ")
		return "http://" + strings.Fields(addr)[0]
	}
	kill := func() {
		_ = proxyCmd.Process.Kill()
		_ = proxyCmd.Wait()
	}

	px := start()
	if st, e := putFenced(t, px+"/docs/1", "20"); st != http.StatusOK {
		t.Fatalf("token 20: %d %+v", st, e)
	}
	kill()
	px = start()
	if st, e := putFenced(t, px+"/docs/1", "19"); st != http.StatusConflict || e.Code != wire.CodeStaleToken || e.LastToken != 20 {
		t.Fatalf("token 19 after a kill: %d %+v, want 409 stale_token last_token 20", st, e)
	}

	go func() {
		req, _ := http.NewRequest(http.MethodPut, px+"/docs/1", strings.NewReader("v"))
		req.Header.Set(wire.HeaderToken, "30")
		req.Header.Set("X-Upstream-Hang", "1")
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
		}
	}()
	tc.Poll(t, 10*time.Second, "the write with token 30 to reach the upstream", func() bool {
		resp, err := http.Get(upstream + "/_arrivals")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		var n int
		return json.NewDecoder(resp.Body).Decode(&n) == nil && n == 2
	})
	kill()
	px = start()
	if st, e := putFenced(t, px+"/docs/1", "25"); st != http.StatusConflict || e.LastToken != 30 {
		t.Fatalf("token 25 after a kill with 30 in flight: %d %+v, want 409 last_token 30", st, e)
	}
	if st, e := putFenced(t, px+"/docs/2", "1"); st != http.StatusOK {
		t.Fatalf("another key: %d %+v", st, e)
	}
}

// A command line the proxy cannot serve fails before anything listens, and
// says which flag is wrong.
func TestFenceProxyFlags(t *testing.T) {
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"--data-dir", t.TempDir()}, "--upstream is required"},
		{[]string{"--upstream", "http://127.0.0.1:1"}, "--data-dir is required"},
		{[]string{"--upstream", "ftp://x", "--data-dir", t.TempDir()}, "http:// or https://"},
		{[]string{"--upstream", "http://127.0.0.1:1", "--data-dir", t.TempDir(), "--key-pattern", "/items/id"}, "no {wildcard}"},
		{[]string{"--upstream", "http://127.0.0.1:1", "--data-dir", t.TempDir(), "--methods", ","}, "--methods is empty"},
	} {
		code, _, stderr := runFencer(t, append([]string{"fence-proxy"}, tt.args...)...)
		if code != 1 || !strings.Contains(stderr, tt.want) {
			t.Errorf("%q: exit %d, stderr %q; want 1 and %q", tt.args, code, stderr, tt.want)
		}
	}
}
