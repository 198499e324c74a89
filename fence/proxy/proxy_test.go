package proxy

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/fencer-io/fencer/api/client"
	"github.com/fencer-io/fencer/api/wire"
	tc "github.com/fencer-io/fencer/test/testcluster"
)

// Every test here puts the proxy in front of testdata/upstream.py, a Python
// service that applies whatever reaches it and logs it.

func TestWriteWithoutTokenRefusedAndNotForwarded(t *testing.T) {
	up := startUpstream(t, 0)
	px := startProxy(t, t.TempDir(), Config{Upstream: mustURL(t, up.URL)})
	for _, headers := range [][]string{
		nil,
		{wire.HeaderToken, ""},
		{wire.HeaderToken, "0"},
		{wire.HeaderToken, "05"},
		{wire.HeaderToken, "-3"},
		{wire.HeaderToken, "3", wire.HeaderToken, "4"},
	} {
		for _, method := range DefaultMethods {
			a := send(t, method, px.URL+"/doc", "x", headers...)
			if a.Status != http.StatusPreconditionRequired || a.Err.Code != wire.CodeMissingToken {
				t.Fatalf("%s with %q: %d %s, want 428 missing_token", method, headers, a.Status, a.Body)
			}
		}
	}
	a := send(t, http.MethodPut, px.URL+"/doc", "x", wire.HeaderToken, "3", wire.HeaderSequence, "01")
	if a.Status != http.StatusBadRequest || a.Err.Code != wire.CodeMalformedSequence {
		t.Fatalf("malformed sequence: %d %s", a.Status, a.Body)
	}
	if ws := up.writes(t); len(ws) != 0 {
		t.Fatalf("refused writes reached the upstream: %+v", ws)
	}
}

func TestStaleWriteRefusedAndNotForwarded(t *testing.T) {
	up := startUpstream(t, 0)
	px := startProxy(t, t.TempDir(), Config{Upstream: mustURL(t, up.URL)})
	if a := send(t, http.MethodPut, px.URL+"/doc", "six", wire.HeaderToken, "6"); a.Status != http.StatusOK {
		t.Fatalf("token 6: %d %s", a.Status, a.Body)
	}
	for _, token := range []string{"5", "6"} {
		a := send(t, http.MethodPost, px.URL+"/doc", "stale", wire.HeaderToken, token)
		if a.Status != http.StatusConflict || a.Err.Code != wire.CodeStaleToken || a.Err.LastToken != 6 {
			t.Fatalf("token %s after 6: %d %s, want 409 stale_token last_token 6", token, a.Status, a.Body)
		}
	}
	// One grant writing twice numbers its writes.
	for i, step := range []struct {
		seq    string
		status int
	}{{"1", 200}, {"2", 200}, {"2", 409}, {"1", 409}} {
		a := send(t, http.MethodPatch, px.URL+"/doc", "seven", wire.HeaderToken, "7", wire.HeaderSequence, step.seq)
		if a.Status != step.status {
			t.Fatalf("step %d 7/%s: %d %s, want %d", i, step.seq, a.Status, a.Body, step.status)
		}
		if a.Status == http.StatusConflict && (a.Err.LastToken != 7 || a.Err.LastSeq != 2) {
			t.Fatalf("step %d: %s, want last 7/2", i, a.Body)
		}
	}
	var tokens []string
	for _, w := range up.writes(t) {
		tokens = append(tokens, w.Token)
	}
	if fmt.Sprint(tokens) != "[6 7 7]" {
		t.Fatalf("upstream applied tokens %v, want [6 7 7]", tokens)
	}
}

func TestReadsPassThrough(t *testing.T) {
	up := startUpstream(t, 0)
	px := startProxy(t, t.TempDir(), Config{Upstream: mustURL(t, up.URL), Methods: []string{http.MethodPut}})
	if a := send(t, http.MethodGet, px.URL+"/doc", ""); a.Status != http.StatusNotFound {
		t.Fatalf("GET before any write: %d %s", a.Status, a.Body)
	}
	send(t, http.MethodPut, px.URL+"/doc", "hello", wire.HeaderToken, "1")
	if a := send(t, http.MethodGet, px.URL+"/doc", ""); a.Status != http.StatusOK || a.Body != "hello" {
		t.Fatalf("GET: %d %q", a.Status, a.Body)
	}
	// Only the configured methods are fenced: here POST is not.
	if a := send(t, http.MethodPost, px.URL+"/other", "unfenced"); a.Status != http.StatusOK {
		t.Fatalf("unfenced POST: %d %s", a.Status, a.Body)
	}
}

func TestKeyPatternFencesEachKey(t *testing.T) {
	up := startUpstream(t, 0)
	px := startProxy(t, t.TempDir(), Config{Upstream: mustURL(t, up.URL), KeyPattern: "/v1/items/{id}"})
	ok := func(path, token string) {
		t.Helper()
		if a := send(t, http.MethodPut, px.URL+path, "v", wire.HeaderToken, token); a.Status != http.StatusOK {
			t.Fatalf("PUT %s token %s: %d %s", path, token, a.Status, a.Body)
		}
	}
	ok("/v1/items/a", "9")
	ok("/v1/items/b", "3") // b has its own mark
	ok("/v1/items/a?ignored=1", "10")
	ok("/v1/items/%61x", "1") // "ax"
	if a := send(t, http.MethodPut, px.URL+"/v1/items/ax", "v", wire.HeaderToken, "1"); a.Status != http.StatusConflict {
		t.Fatalf("ax escaped and not: one key, want 409: %d %s", a.Status, a.Body)
	}
	if a := send(t, http.MethodPut, px.URL+"/v1/items/a", "v", wire.HeaderToken, "5"); a.Status != http.StatusConflict || a.Err.LastToken != 10 {
		t.Fatalf("stale on a: %d %s", a.Status, a.Body)
	}
	before := len(up.writes(t))
	for _, path := range []string{"/v1/other", "/v1/items", "/v1/items/", "/v1/items/a/b", "/v1/items/..", "/v1/items/a%2Fb", "/V1/items/a"} {
		a := send(t, http.MethodPut, px.URL+path, "v", wire.HeaderToken, "99")
		if a.Status != http.StatusBadRequest || a.Err.Code != wire.CodeEmptyKey {
			t.Fatalf("PUT %s: %d %s, want 400 empty_key", path, a.Status, a.Body)
		}
	}
	if n := len(up.writes(t)); n != before {
		t.Fatalf("writes the pattern cannot name reached the upstream: %d", n-before)
	}
}

func TestWholeUpstreamIsOneFence(t *testing.T) {
	up := startUpstream(t, 0)
	px := startProxy(t, t.TempDir(), Config{Upstream: mustURL(t, up.URL)})
	send(t, http.MethodPut, px.URL+"/a", "v", wire.HeaderToken, "9")
	if a := send(t, http.MethodDelete, px.URL+"/b", "", wire.HeaderToken, "5"); a.Status != http.StatusConflict || a.Err.LastToken != 9 {
		t.Fatalf("token 5 on /b after 9 on /a: %d %s", a.Status, a.Body)
	}
}

// TestRefusedByUpstreamLeavesMark: a write the upstream answers with an
// error did not happen, so the mark stays where it was and a lower token
// than the refused one still passes.
func TestRefusedByUpstreamLeavesMark(t *testing.T) {
	up := startUpstream(t, 0)
	px := startProxy(t, t.TempDir(), Config{Upstream: mustURL(t, up.URL)})
	send(t, http.MethodPut, px.URL+"/doc", "six", wire.HeaderToken, "6")
	for _, status := range []string{"500", "409", "404", "302"} {
		a := send(t, http.MethodPut, px.URL+"/doc", "ten", wire.HeaderToken, "10", "X-Upstream-Status", status)
		if strconv.Itoa(a.Status) != status {
			t.Fatalf("upstream's %s came back as %d %s", status, a.Status, a.Body)
		}
	}
	if a := send(t, http.MethodPut, px.URL+"/doc", "seven", wire.HeaderToken, "7"); a.Status != http.StatusOK {
		t.Fatalf("token 7 after 6 and refused 10s: %d %s, want 200", a.Status, a.Body)
	}
	if hw, _ := px.marks.HighWater(WholeUpstream); hw.Token != 7 {
		t.Fatalf("mark = %+v, want 7", hw)
	}
}

// TestUnreachableUpstreamLeavesMark: a write that could not be sent did not
// happen either.
func TestUnreachableUpstreamLeavesMark(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := "http://" + ln.Addr().String()
	ln.Close() // nothing listens there now
	dir := t.TempDir()
	px := startProxy(t, dir, Config{Upstream: mustURL(t, dead)})
	a := send(t, http.MethodPut, px.URL+"/doc", "v", wire.HeaderToken, "10")
	if a.Status != http.StatusBadGateway || a.Err.Code != wire.CodeInternal {
		t.Fatalf("dead upstream: %d %s, want 502 internal", a.Status, a.Body)
	}
	if hw, _ := px.marks.HighWater(WholeUpstream); hw.Token != 0 {
		t.Fatalf("mark = %+v after a write never sent", hw)
	}
}

// TestMarkSurvivesProxyRestart closes the proxy and its store and opens
// them again on the same directory: the mark is still there. (The command's
// test kills the process instead; cmd/fencer.)
func TestMarkSurvivesProxyRestart(t *testing.T) {
	up := startUpstream(t, 0)
	dir := t.TempDir()
	cfg := Config{Upstream: mustURL(t, up.URL), KeyPattern: "/docs/{id}"}
	px := startProxy(t, dir, cfg)
	send(t, http.MethodPut, px.URL+"/docs/1", "v", wire.HeaderToken, "20")
	px.stop()

	if _, err := OpenMarks(dir+"/marks.db", ""); err == nil {
		t.Fatal("reopened with another key pattern")
	}
	px = startProxy(t, dir, cfg)
	if a := send(t, http.MethodPut, px.URL+"/docs/1", "v", wire.HeaderToken, "19"); a.Status != http.StatusConflict || a.Err.LastToken != 20 {
		t.Fatalf("token 19 after restart: %d %s, want 409 last_token 20", a.Status, a.Body)
	}
	if a := send(t, http.MethodPut, px.URL+"/docs/1", "v", wire.HeaderToken, "21"); a.Status != http.StatusOK {
		t.Fatalf("token 21 after restart: %d %s", a.Status, a.Body)
	}
}

// TestConcurrentWritersNewestWins: writers race on two keys through the
// proxy to an upstream that pauses each write a random while, so that two
// writes let through together would land in either order. On x the tokens
// are interleaved (a random order, all at once); on y they come in
// increasing order a moment apart, so each passes the mark while the one
// before may still be on its way. Per key, the upstream must have applied
// strictly increasing tokens ending with the greatest, and every other
// write must have been refused as stale.
func TestConcurrentWritersNewestWins(t *testing.T) {
	up := startUpstream(t, 20)
	px := startProxy(t, t.TempDir(), Config{Upstream: mustURL(t, up.URL), KeyPattern: "/k/{key}"})
	const n = 30
	var wg sync.WaitGroup
	var mu sync.Mutex
	accepted := map[string]int{}
	write := func(key string, token int) {
		tok := strconv.Itoa(token)
		a := send(t, http.MethodPut, px.URL+"/k/"+key, key+tok, wire.HeaderToken, tok)
		switch {
		case a.Status == http.StatusOK:
			mu.Lock()
			accepted[key]++
			mu.Unlock()
		case a.Status != http.StatusConflict || a.Err.Code != wire.CodeStaleToken:
			t.Errorf("%s token %s: %d %s", key, tok, a.Status, a.Body)
		}
	}
	for _, i := range rand.Perm(n) {
		wg.Go(func() { write("x", i+1) })
	}
	for i := range n {
		wg.Go(func() { write("y", i+1) })
		time.Sleep(2 * time.Millisecond) // a stagger, not a wait for a state
	}
	wg.Wait()
	last := map[string]int{}
	applied := map[string]int{}
	for _, w := range up.writes(t) {
		key := w.Path[len("/k/"):]
		tok, _ := strconv.Atoi(w.Token)
		if tok <= last[key] {
			t.Fatalf("upstream applied token %d to %s after %d", tok, key, last[key])
		}
		last[key] = tok
		applied[key]++
	}
	for _, key := range []string{"x", "y"} {
		if last[key] != n || applied[key] != accepted[key] {
			t.Fatalf("%s: last applied %d (want %d), applied %d, accepted %d", key, last[key], n, applied[key], accepted[key])
		}
		if a := send(t, http.MethodGet, px.URL+"/k/"+key, ""); a.Body != key+strconv.Itoa(n) {
			t.Fatalf("%s holds %q", key, a.Body)
		}
	}
	t.Logf("accepted per key (of %d): %v", n, accepted)
}

// TestFencingLockCheckedWithCluster: a write naming its lock passes only
// while its token is the lock's current grant, asked of a real node.
func TestFencingLockCheckedWithCluster(t *testing.T) {
	cl := tc.New(t, 1)
	c, err := client.New([]string{cl.Nodes[0].URL()})
	if err != nil {
		t.Fatal(err)
	}
	up := startUpstream(t, 0)
	px := startProxy(t, t.TempDir(), Config{Upstream: mustURL(t, up.URL), Locks: c})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	lease, err := c.Acquire(ctx, "job")
	if err != nil {
		t.Fatal(err)
	}
	tok := strconv.FormatUint(lease.Token(), 10)
	if a := send(t, http.MethodPut, px.URL+"/doc", "v", wire.HeaderToken, tok, wire.HeaderLock, "job"); a.Status != http.StatusOK {
		t.Fatalf("current holder: %d %s", a.Status, a.Body)
	}
	if a := send(t, http.MethodPut, px.URL+"/doc", "v", wire.HeaderToken, tok, wire.HeaderSequence, "1", wire.HeaderLock, "other"); a.Status != http.StatusConflict || a.Err.Code != wire.CodeNotLockHolder {
		t.Fatalf("token of another lock: %d %s, want 409 not_lock_holder", a.Status, a.Body)
	}
	if err := lease.Release(ctx); err != nil {
		t.Fatal(err)
	}
	// Released: the mark alone would still let this (token, seq) through.
	if a := send(t, http.MethodPut, px.URL+"/doc", "v", wire.HeaderToken, tok, wire.HeaderSequence, "1", wire.HeaderLock, "job"); a.Status != http.StatusConflict || a.Err.Code != wire.CodeNotLockHolder {
		t.Fatalf("released grant: %d %s, want 409 not_lock_holder", a.Status, a.Body)
	}
	if a := send(t, http.MethodPut, px.URL+"/doc", "v", wire.HeaderToken, tok, wire.HeaderLock, "bad name!"); a.Status != http.StatusBadRequest || a.Err.Code != wire.CodeInvalidName {
		t.Fatalf("bad lock name: %d %s", a.Status, a.Body)
	}
	if n := len(up.writes(t)); n != 1 {
		t.Fatalf("upstream applied %d writes, want 1", n)
	}
}
