package api

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/fencer-io/fencer/api/wire"
	"github.com/fencer-io/fencer/coord/events"
	"github.com/fencer-io/fencer/fsm/event"
	"github.com/fencer-io/fencer/internal/acl"
)

// pollUntil fails the test unless ok holds within 10 s.
func pollUntil(t *testing.T, what string, ok func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !ok(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("not within 10s: %s", what)
		}
	}
}

// heapInUse is the process's live heap after a collection.
func heapInUse() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapInuse
}

// unreadStream opens GET path on a raw connection with a small receive
// buffer and never reads it, as an attacker would.
func unreadStream(t *testing.T, addr, path string) net.Conn {
	t.Helper()
	d := net.Dialer{Control: func(_, _ string, c syscall.RawConn) error {
		return c.Control(func(fd uintptr) { syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096) })
	}}
	conn, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	fmt.Fprintf(conn, "GET %s HTTP/1.1\r\nHost: %s\r\n\r\n", path, addr)
	return conn
}

// Issue 26, F1: streams that never read took a copy of the whole kept
// history each and held it, with no write deadline, for as long as the
// client kept the connection (100 streams: a gigabyte). Now twenty of them
// from the oldest index of a 50,000-event history hold no copy, and each is
// disconnected once a write has waited the write timeout.
func TestUnreadStreamsAreBounded(t *testing.T) {
	f := &fakeCluster{leader: true, events: events.New(events.Config{})}
	holder := strings.Repeat("h", 200) // ~400 B an event on the wire
	for i := uint64(1); i <= 50_000; i++ {
		f.events.Applied(i, []event.Event{{Index: i, Type: event.Acquired, Lock: "l", Holder: holder, Token: i}})
	}
	s := NewServer(f, f, nil, WithLeaderWait(0), WithWatchLimits(WatchLimits{WriteTimeout: 3 * time.Second}))
	srv := httptest.NewServer(s.Handler())
	t.Cleanup(srv.Close)
	addr := strings.TrimPrefix(srv.URL, "http://")

	before := heapInUse()
	const streams = 20
	for range streams {
		unreadStream(t, addr, "/v1/events?since=0")
	}
	pollUntil(t, "20 streams open", func() bool { return s.streams.Open() == streams })
	// A copy of the history per stream is 50,000 × ~200 B = 10 MB each.
	if grown := int64(heapInUse()) - int64(before); grown > 40<<20 {
		t.Fatalf("%d unread streams grew the heap by %d MB", streams, grown>>20)
	}
	pollUntil(t, "the unread streams disconnected by the write timeout", func() bool { return s.streams.Open() == 0 })
}

// aclFile writes an ACL file.
func aclFile(t *testing.T, path, body string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
}

const (
	secretJobs   = "jobs-reader-secret-0123456789"
	secretNarrow = "narrow-reader-secret-0123456789"
)

// Issue 26, F4: removing a token from the ACL did not end its open stream
// (new requests got 401, the stream kept delivering). After a reload a
// removed token's stream is closed and its parked blocking read answered
// 401; a token narrowed to fewer prefixes sees no more events outside them,
// and its parked read of a lock it may no longer read is answered 403.
func TestACLReloadEndsAndNarrowsWatches(t *testing.T) {
	path := filepath.Join(t.TempDir(), "acl.json")
	aclFile(t, path, `{"tokens":[
	 {"name":"jreader","secret":"`+secretJobs+`","role":"reader","locks":["jobs."]},
	 {"name":"narrow","secret":"`+secretNarrow+`","role":"reader","locks":["jobs.","billing."]}]}`)
	store, err := acl.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	f := &fakeCluster{leader: true, events: events.New(events.Config{})}
	f.events.Applied(1, []event.Event{{Index: 1, Type: event.Acquired, Lock: "jobs.a", Holder: "w", Token: 1}})
	s := newFakeServer(f)
	srv := httptest.NewServer(acl.Middleware(store)(s.Handler()))
	t.Cleanup(srv.Close)

	jobs := watchReq(t, srv.URL+"/v1/events?since=0", secretJobs)
	narrow := watchReq(t, srv.URL+"/v1/events?since=0", secretNarrow)
	if jobs.StatusCode != 200 || narrow.StatusCode != 200 {
		t.Fatalf("watch: %d %d", jobs.StatusCode, narrow.StatusCode)
	}
	jobsEvents, narrowEvents := sseReader(jobs), sseReader(narrow)
	for _, r := range []func() (sseEvent, bool){jobsEvents, narrowEvents} {
		if e, ok := r(); !ok || e.data.Lock != "jobs.a" {
			t.Fatalf("before the reload: %+v %v", e, ok)
		}
	}
	parked := func(secret, lock string) <-chan int {
		out := make(chan int, 1)
		go func() {
			req, _ := http.NewRequest("GET", srv.URL+"/v1/locks/"+lock+"?wait_index=1&wait=1m", nil)
			req.Header.Set("Authorization", "Bearer "+secret)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				out <- 0
				return
			}
			resp.Body.Close()
			out <- resp.StatusCode
		}()
		return out
	}
	jobsRead, narrowRead, keptRead := parked(secretJobs, "jobs.a"), parked(secretNarrow, "billing.x"), parked(secretNarrow, "jobs.z")
	pollUntil(t, "3 blocking reads parked", func() bool { return s.blocking.Open() == 3 })

	aclFile(t, path, `{"tokens":[{"name":"narrow","secret":"`+secretNarrow+`","role":"reader","locks":["jobs."]}]}`)
	if err := store.Reload(); err != nil {
		t.Fatal(err)
	}
	f.events.Applied(2, []event.Event{{Index: 2, Type: event.Acquired, Lock: "billing.y", Holder: "w", Token: 2}})
	f.events.Applied(3, []event.Event{{Index: 3, Type: event.Acquired, Lock: "jobs.b", Holder: "w", Token: 3}})

	if e, ok := jobsEvents(); ok {
		t.Fatalf("the removed token's stream delivered %+v after the reload", e)
	}
	if e, ok := narrowEvents(); !ok || e.data.Lock != "jobs.b" {
		t.Fatalf("the narrowed token's stream delivered %+v (%v) after the reload, want jobs.b and not billing.y", e, ok)
	}
	for _, c := range []struct {
		name string
		got  <-chan int
		want int
	}{{"removed token's read", jobsRead, http.StatusUnauthorized}, {"narrowed token's read outside its prefixes", narrowRead, http.StatusForbidden}} {
		select {
		case status := <-c.got:
			if status != c.want {
				t.Errorf("%s: %d, want %d", c.name, status, c.want)
			}
		case <-time.After(10 * time.Second):
			t.Errorf("%s still parked 10 s after the reload", c.name)
		}
	}
	// A read the token may still make is answered (the reload woke it: a
	// spurious wake-up, allowed), with the lock's state.
	if status := <-keptRead; status != http.StatusOK {
		t.Errorf("narrowed token's read within its prefixes: %d", status)
	}
}

// sseReader returns a function that reads the stream's next event; false
// once the stream ended or stayed silent for 5 s.
func sseReader(resp *http.Response) func() (sseEvent, bool) {
	type result struct {
		e  sseEvent
		ok bool
	}
	c := make(chan result)
	go func() {
		sc := bufio.NewScanner(resp.Body)
		var cur sseEvent
		for sc.Scan() {
			line := sc.Text()
			switch {
			case line == "" && cur.typ != "":
				c <- result{cur, true}
				cur = sseEvent{}
			case strings.HasPrefix(line, "id: "):
				cur.id = line[4:]
			case strings.HasPrefix(line, "event: "):
				cur.typ = line[7:]
			case strings.HasPrefix(line, "data: "):
				json.Unmarshal([]byte(line[6:]), &cur.data)
			}
		}
		close(c)
	}()
	return func() (sseEvent, bool) {
		select {
		case r, ok := <-c:
			return r.e, ok && r.ok
		case <-time.After(5 * time.Second):
			resp.Body.Close()
			return sseEvent{}, false
		}
	}
}

// Open streams and blocking reads are limited per client and per node:
// past either, 429 too_many_watches with Retry-After; a slot is free again
// once its request ends.
func TestWatchLimits(t *testing.T) {
	a, err := acl.Parse([]byte(`{"tokens":[
	 {"name":"a","secret":"a-secret-0123456789abc","role":"reader"},
	 {"name":"b","secret":"b-secret-0123456789abc","role":"reader"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	f := &fakeCluster{leader: true, events: events.New(events.Config{})}
	s := NewServer(f, f, nil, WithLeaderWait(0), WithWatchLimits(WatchLimits{Streams: 3, StreamsPerClient: 2, BlockingReads: 3, BlockingReadsPerClient: 2}))
	srv := httptest.NewServer(acl.Middleware(acl.NewStore(a))(s.Handler()))
	t.Cleanup(srv.Close)

	open := func(secret, path string) (*http.Response, context.CancelFunc) {
		ctx, cancel := context.WithCancel(context.Background())
		t.Cleanup(cancel)
		req, _ := http.NewRequestWithContext(ctx, "GET", srv.URL+path, nil)
		req.Header.Set("Authorization", "Bearer "+secret)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { resp.Body.Close() })
		return resp, cancel
	}
	refused := func(resp *http.Response, who string) {
		t.Helper()
		var body wire.Error
		json.NewDecoder(resp.Body).Decode(&body)
		if resp.StatusCode != http.StatusTooManyRequests || body.Code != wire.CodeTooManyWatches || resp.Header.Get("Retry-After") == "" || !strings.Contains(body.Message, who) {
			t.Fatalf("past the limit: %d %+v Retry-After %q, want 429 too_many_watches naming %q", resp.StatusCode, body, resp.Header.Get("Retry-After"), who)
		}
	}
	const sa, sb = "a-secret-0123456789abc", "b-secret-0123456789abc"
	_, closeFirst := open(sa, "/v1/events")
	open(sa, "/v1/events")
	resp, _ := open(sa, "/v1/events")
	refused(resp, "this client")
	open(sb, "/v1/events")
	resp, _ = open(sb, "/v1/events")
	refused(resp, "this node")
	closeFirst()
	pollUntil(t, "a closed stream's slot freed", func() bool { return s.streams.Open() == 2 })
	if resp, _ := open(sb, "/v1/events"); resp.StatusCode != 200 {
		t.Fatalf("after a stream closed: %d", resp.StatusCode)
	}

	// Blocking reads park until their wait ends; the answer's status is
	// only known then, so these run in the background.
	park := func(secret string) <-chan *http.Response {
		c := make(chan *http.Response, 1)
		go func() {
			req, _ := http.NewRequest("GET", srv.URL+"/v1/locks/idle?wait_index=0&wait=1m", nil)
			req.Header.Set("Authorization", "Bearer "+secret)
			ctx, cancel := context.WithCancel(context.Background())
			t.Cleanup(cancel)
			resp, err := http.DefaultClient.Do(req.WithContext(ctx))
			if err == nil {
				c <- resp
			}
		}()
		return c
	}
	park(sa)
	park(sa)
	pollUntil(t, "2 blocking reads parked", func() bool { return s.blocking.Open() == 2 })
	refused(<-park(sa), "this client")
	park(sb)
	pollUntil(t, "3 blocking reads parked", func() bool { return s.blocking.Open() == 3 })
	refused(<-park(sb), "this node")
}
