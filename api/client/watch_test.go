package client_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fencer-io/fencer/api/client"
	"github.com/fencer-io/fencer/api/wire"
	"github.com/fencer-io/fencer/coord/events"
	"github.com/fencer-io/fencer/internal/server"
	tc "github.com/fencer-io/fencer/test/testcluster"
)

// collector runs a watch in the background and keeps what it yields.
type collector struct {
	mu     sync.Mutex
	events []wire.Event
	err    error
	done   chan struct{}
}

func watchInBackground(t *testing.T, cl *client.Client, prefix string, since uint64) *collector {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	col := &collector{done: make(chan struct{})}
	t.Cleanup(func() { cancel(); <-col.done })
	go func() {
		defer close(col.done)
		for ev, err := range cl.Watch(ctx, prefix, since) {
			col.mu.Lock()
			if err != nil {
				col.err = err
			} else {
				col.events = append(col.events, ev)
			}
			col.mu.Unlock()
		}
	}()
	return col
}

func (col *collector) snapshot() ([]wire.Event, error) {
	col.mu.Lock()
	defer col.mu.Unlock()
	return append([]wire.Event(nil), col.events...), col.err
}

// waitFor polls until cond holds on what the watch yielded; it fails the
// test if the watch ended first.
func (col *collector) waitFor(t *testing.T, what string, cond func([]wire.Event) bool) []wire.Event {
	t.Helper()
	var got []wire.Event
	tc.Poll(t, 20*time.Second, what, func() bool {
		var err error
		got, err = col.snapshot()
		if err != nil {
			t.Fatalf("watch ended waiting for %s: %v (after %d events)", what, err, len(got))
		}
		return cond(got)
	})
	return got
}

func describe(evs []wire.Event) string {
	var b strings.Builder
	for _, e := range evs {
		fmt.Fprintf(&b, "%s:%s%s:%d ", e.Type, e.Lock, e.Key, e.Token)
	}
	return strings.TrimSpace(b.String())
}

// A watcher sees acquires, releases and fenced writes under its prefix, in
// order, each with its token; other locks are left out.
func TestWatchSeesAcquireRelease(t *testing.T) {
	c := tc.New(t, 3)
	cl, _ := newClient(t, c)
	ctx := context.Background()
	col := watchInBackground(t, cl, "w.", 0)

	a, err := cl.Acquire(ctx, "w.a", client.Holder("one"), client.NoKeepAlive())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cl.Acquire(ctx, "other", client.NoKeepAlive()); err != nil {
		t.Fatal(err)
	}
	if err := cl.PutFenced(ctx, "w.k", []byte("12345"), a.Token()); err != nil {
		t.Fatal(err)
	}
	if err := a.Release(ctx); err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf("acquired:w.a:%d put:w.k:%d released:w.a:%d", a.Token(), a.Token(), a.Token())
	got := col.waitFor(t, "the release", func(evs []wire.Event) bool { return len(evs) >= 3 })
	if describe(got) != want {
		t.Fatalf("watched %s, want %s", describe(got), want)
	}
	if got[0].Holder != "one" || got[1].ValueSize == nil || *got[1].ValueSize != 5 || !(got[0].Index < got[1].Index && got[1].Index < got[2].Index) {
		t.Fatalf("events %+v", got)
	}

	// FromNow starts at the applied index of the member reached first:
	// with the leader first, not before the grant it already answered.
	leader := c.WaitLeader(5 * time.Second)
	now, err := client.New([]string{leader.HTTPAddr})
	if err != nil {
		t.Fatal(err)
	}
	b, err := cl.Acquire(ctx, "w.b", client.NoKeepAlive())
	if err != nil {
		t.Fatal(err)
	}
	fromNow := watchInBackground(t, now, "w.", client.FromNow)
	if err := b.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if got := fromNow.waitFor(t, "the release of w.b", func(evs []wire.Event) bool { return len(evs) >= 1 }); describe(got) != fmt.Sprintf("released:w.b:%d", b.Token()) {
		t.Fatalf("from now: %s", describe(got))
	}
}

// No gap, no duplicate: a watcher on a follower that is stopped mid-stream
// reconnects to another member with Last-Event-ID and sees each index once,
// in order, and every grant the workload got, with its token, in order.
func TestWatchFollowerStoppedMidStream(t *testing.T) {
	c := tc.New(t, 3)
	leader := c.WaitLeader(10 * time.Second)
	var follower *tc.Node
	eps := []string{}
	for _, n := range c.Running() {
		if n != leader && follower == nil {
			follower = n
			eps = append([]string{n.HTTPAddr}, eps...)
		} else {
			eps = append(eps, n.HTTPAddr)
		}
	}
	var resumes atomic.Int32
	h := &hooks{base: &http.Transport{}}
	h.set(func(req *http.Request, next http.RoundTripper) (*http.Response, error) {
		if req.URL.Path == "/v1/events" && req.Header.Get(wire.HeaderLastEventID) != "0" {
			resumes.Add(1)
		}
		return next.RoundTrip(req)
	})
	watcher, err := client.New(eps, client.WithHTTPClient(&http.Client{Transport: h}), client.WithTimeout(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	col := watchInBackground(t, watcher, "nd.", 0)
	worker, _ := newClient(t, c)

	ctx := context.Background()
	var tokens []uint64
	work := func(n int) {
		for range n {
			l, err := worker.Acquire(ctx, fmt.Sprintf("nd.%d", len(tokens)%3), client.NoKeepAlive())
			if err != nil {
				t.Fatal(err)
			}
			tokens = append(tokens, l.Token())
			if err := l.Release(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	work(15)
	col.waitFor(t, "the follower's stream to deliver the first grants", func(evs []wire.Event) bool { return len(evs) >= 10 })
	c.Stop(follower)
	work(15)
	last := tokens[len(tokens)-1]
	got := col.waitFor(t, "the last release", func(evs []wire.Event) bool {
		return len(evs) > 0 && evs[len(evs)-1].Type == wire.EventReleased && evs[len(evs)-1].Token == last
	})
	if resumes.Load() == 0 {
		t.Fatalf("the watch never reconnected with Last-Event-ID")
	}
	var seen []uint64
	for i, e := range got {
		if i > 0 && e.Index <= got[i-1].Index {
			t.Fatalf("index %d after %d: a duplicate or out of order\n%s", e.Index, got[i-1].Index, describe(got))
		}
		want := wire.EventAcquired
		if i%2 == 1 {
			want = wire.EventReleased
		}
		if e.Type != want || (i%2 == 1 && e.Token != got[i-1].Token) {
			t.Fatalf("event %d is %s:%d, want %s\n%s", i, e.Type, e.Token, want, describe(got))
		}
		if e.Type == wire.EventAcquired {
			seen = append(seen, e.Token)
		}
	}
	if fmt.Sprint(seen) != fmt.Sprint(tokens) {
		t.Fatalf("watched grants %v, the workload got %v", seen, tokens)
	}
}

// A watch from before what the members keep ends with ErrEventsCompacted,
// carrying the index to re-list at; watching from there works.
func TestWatchCompacted(t *testing.T) {
	c := tc.New(t, 1, tc.Options{Server: func(string) server.Options {
		return server.Options{Events: events.Config{History: 4}}
	}})
	cl, _ := newClient(t, c)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for i := range 10 {
		l, err := cl.Acquire(ctx, fmt.Sprintf("c.%d", i), client.NoKeepAlive())
		if err != nil {
			t.Fatal(err)
		}
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
	var final error
	n := 0
	for _, err := range cl.Watch(ctx, "", 1) {
		if err != nil {
			final = err
			break
		}
		n++
	}
	var api *client.APIError
	if !errors.Is(final, client.ErrEventsCompacted) || !errors.As(final, &api) || api.Index < 20 || api.Oldest <= 1 || n != 0 {
		t.Fatalf("watch since 1 with 4 entries kept: %d events, then %v (%+v)", n, final, api)
	}
	for ev, err := range cl.Watch(ctx, "", api.Index-1) {
		if err != nil {
			t.Fatalf("re-watch from %d: %v", api.Index-1, err)
		}
		if ev.Index != api.Index {
			t.Fatalf("re-watch from %d: first event %+v", api.Index-1, ev)
		}
		break
	}
}

// The stream parser: comments, CRLF, retry:, data over several lines, an
// unknown type passed through, a stream cut in the middle of an entry
// (only its last event has an id) resumed without repeating what was
// delivered, lagged resumed at its index, and 410 ending the watch.
func TestWatchParsesTheStream(t *testing.T) {
	var calls atomic.Int32
	var bad atomic.Value
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		last := r.Header.Get(wire.HeaderLastEventID)
		switch calls.Add(1) {
		case 1:
			if last != "2" || r.URL.Query().Get("since") != "2" || r.URL.Query().Get("prefix") != "p" {
				bad.Store("first request: " + r.URL.String() + " Last-Event-ID " + last)
			}
			w.Header().Set("Content-Type", "text/event-stream")
			io.WriteString(w, ": hello\r\nretry: 5\r\n\r\nid: 3\r\nevent: acquired\r\ndata: {\"index\":3,\"type\":\"acquired\",\"lock\":\"p1\",\"token\":3}\r\n\r\n")
			io.WriteString(w, "event: voided\ndata: {\"index\":5,\"type\":\"voided\",\"lock\":\"pa\",\"token\":1}\n\n")
			io.WriteString(w, "id: 5\nevent: voided\ndata: {\"index\":5,\"type\":\"voi") // cut
		case 2:
			if last != "3" {
				bad.Store("second request: Last-Event-ID " + last)
			}
			io.WriteString(w, "event: voided\ndata: {\"index\":5,\"type\":\"voided\",\"lock\":\"pa\",\"token\":1}\n\n")
			io.WriteString(w, "id: 5\nevent: voided\ndata: {\"index\":5,\"type\":\"voided\",\"lock\":\"pb\",\"token\":2}\n\n")
			io.WriteString(w, ": keepalive\n\nid: 6\nevent: future\ndata: {\"index\":6,\ndata: \"type\":\"future\",\"lock\":\"p2\"}\n\n")
			io.WriteString(w, "id: 6\nevent: lagged\ndata: {\"index\":6,\"type\":\"lagged\"}\n\n")
		default:
			if last != "6" {
				bad.Store("third request: Last-Event-ID " + last)
			}
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusGone)
			io.WriteString(w, `{"error":"compacted","code":"events_compacted","oldest":9,"index":12}`)
		}
	}))
	defer srv.Close()
	cl, err := client.New([]string{srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	var got []wire.Event
	var final error
	for ev, err := range cl.Watch(context.Background(), "p", 2) {
		if err != nil {
			final = err
			break
		}
		got = append(got, ev)
	}
	if b := bad.Load(); b != nil {
		t.Fatal(b)
	}
	if want := "acquired:p1:3 voided:pa:1 voided:pb:2 future:p2:0"; describe(got) != want {
		t.Fatalf("watched %s, want %s", describe(got), want)
	}
	var api *client.APIError
	if !errors.Is(final, client.ErrEventsCompacted) || errors.Is(final, client.ErrUnavailable) || calls.Load() != 3 || !errors.As(final, &api) || api.Oldest != 9 || api.Index != 12 {
		t.Fatalf("after %d requests, final error %v", calls.Load(), final)
	}
}

// List, then watch: watching from the index a list was read at delivers
// the changes after it, and none the list already shows.
func TestListThenWatch(t *testing.T) {
	c := tc.New(t, 3)
	cl, _ := newClient(t, c)
	ctx := context.Background()
	for _, name := range []string{"lw.a", "lw.b"} {
		if _, err := cl.Acquire(ctx, name, client.NoKeepAlive()); err != nil {
			t.Fatal(err)
		}
	}
	locks, index, err := cl.LocksAt(ctx)
	if err != nil || len(locks) != 2 {
		t.Fatalf("list: %+v, %v", locks, err)
	}
	cw, err := cl.Acquire(ctx, "lw.c", client.NoKeepAlive())
	if err != nil {
		t.Fatal(err)
	}
	// From a follower: any member serves the watch from its own log.
	leader := c.WaitLeader(5 * time.Second)
	var follower string
	for _, n := range c.Running() {
		if n != leader {
			follower = n.HTTPAddr
		}
	}
	fc, err := client.New([]string{follower})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	for ev, err := range fc.Watch(ctx, "lw.", index) {
		if err != nil {
			t.Fatalf("watch from %d: %v", index, err)
		}
		if ev.Type != wire.EventAcquired || ev.Lock != "lw.c" || ev.Token != cw.Token() {
			t.Fatalf("first event after the list at %d: %+v", index, ev)
		}
		break
	}
}

// A member that sends an event that is not one ends the watch with
// ErrBadAnswer, the client's error for an answer it did not ask for, not a
// bare decoding error. Fails without the wrap in watch.deliver.
func TestWatchMalformedEventIsABadAnswer(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, "id: 3\nevent: acquired\ndata: {\"index\":3,\"type\":\"acq\n\n")
	}))
	defer srv.Close()
	cl, err := client.New([]string{srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	for _, err := range cl.Watch(context.Background(), "", 2) {
		if !errors.Is(err, client.ErrBadAnswer) {
			t.Fatalf("a malformed event: %v, want ErrBadAnswer", err)
		}
		return
	}
	t.Fatal("the watch ended without an error")
}
