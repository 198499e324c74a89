package api

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/fencer-io/fencer/api/wire"
	"github.com/fencer-io/fencer/coord/events"
	"github.com/fencer-io/fencer/fsm/event"
	"github.com/fencer-io/fencer/internal/acl"
)

// sseEvent is one event as a stream carried it.
type sseEvent struct {
	id, typ string
	data    wire.Event
}

// readSSE parses a stream until it ends or stop says so.
func readSSE(t *testing.T, body io.Reader, stop func([]sseEvent) bool) []sseEvent {
	t.Helper()
	var out []sseEvent
	var cur sseEvent
	sc := bufio.NewScanner(body)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if cur.typ != "" {
				out = append(out, cur)
				if stop != nil && stop(out) {
					return out
				}
			}
			cur = sseEvent{}
		case strings.HasPrefix(line, "id: "):
			cur.id = line[4:]
		case strings.HasPrefix(line, "event: "):
			cur.typ = line[7:]
		case strings.HasPrefix(line, "data: "):
			if err := json.Unmarshal([]byte(line[6:]), &cur.data); err != nil {
				t.Fatalf("data %q: %v", line, err)
			}
		}
	}
	return out
}

func watchReq(t *testing.T, url, secret string) *http.Response {
	t.Helper()
	req, _ := http.NewRequest("GET", url, nil)
	if secret != "" {
		req.Header.Set("Authorization", "Bearer "+secret)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

// A principal limited to prefixes sees only the events of its locks (and
// semaphores) and keys; ?prefix narrows further, and drops the events without a name.
func TestEventStreamFilteredByACLAndPrefix(t *testing.T) {
	a, err := acl.Parse([]byte(`{"tokens":[
	 {"name":"ci","secret":"scoped-secret-0123456789","role":"reader","locks":["jobs."],"keys":["cfg."]},
	 {"name":"ops","secret":"operator-secret-0123456789","role":"operator","keys":["*"]}]}`))
	if err != nil {
		t.Fatal(err)
	}
	f := &fakeCluster{leader: true, events: events.New(events.Config{})}
	f.events.Applied(1, []event.Event{{Index: 1, Type: event.MemberAdded, Member: "n1"}})
	f.events.Applied(2, []event.Event{{Index: 2, Type: event.Acquired, Lock: "jobs.a", Holder: "w", Token: 2}})
	f.events.Applied(3, []event.Event{{Index: 3, Type: event.Acquired, Lock: "billing.x", Holder: "w", Token: 3}})
	f.events.Applied(4, []event.Event{{Index: 4, Type: event.Put, Key: "cfg.db", Token: 2, ValueSize: 5}})
	f.events.Applied(5, []event.Event{{Index: 5, Type: event.Put, Key: "jobs.k", Token: 3}})
	f.events.Applied(6, []event.Event{{Index: 6, Type: event.PermitAcquired, Semaphore: "billing.s", Holder: "w", Token: 6, Limit: 2, Held: 1}})
	f.events.Applied(7, []event.Event{{Index: 7, Type: event.Released, Lock: "jobs.a", Holder: "w", Token: 2}})
	srv := httptest.NewServer(acl.Middleware(acl.NewStore(a))(newFakeServer(f).Handler()))
	t.Cleanup(srv.Close) // after the streams close (cleanups run last first)

	names := func(secret, query string) string {
		resp := watchReq(t, srv.URL+"/v1/events?since=0"+query, secret)
		if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
			t.Fatalf("watch: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
		}
		var got []string
		for _, e := range readSSE(t, resp.Body, func(evs []sseEvent) bool { return evs[len(evs)-1].id == "7" }) {
			if e.id != fmt.Sprint(e.data.Index) || e.typ != e.data.Type {
				t.Fatalf("event %+v: id and type disagree with its data", e)
			}
			got = append(got, e.id+":"+e.typ+":"+e.data.Lock+e.data.Key+e.data.Member+e.data.Semaphore)
		}
		return strings.Join(got, " ")
	}
	if got, want := names("scoped-secret-0123456789", ""), "1:member_added:n1 2:acquired:jobs.a 4:put:cfg.db 7:released:jobs.a"; got != want {
		t.Errorf("scoped reader saw %s, want %s", got, want)
	}
	if got, want := names("operator-secret-0123456789", ""), "1:member_added:n1 2:acquired:jobs.a 3:acquired:billing.x 4:put:cfg.db 5:put:jobs.k 6:permit_acquired:billing.s 7:released:jobs.a"; got != want {
		t.Errorf("operator saw %s, want %s", got, want)
	}
	if got, want := names("operator-secret-0123456789", "&prefix=jobs."), "2:acquired:jobs.a 5:put:jobs.k 7:released:jobs.a"; got != want {
		t.Errorf("operator with prefix jobs. saw %s, want %s", got, want)
	}
}

// Asking for events older than the node keeps is 410 events_compacted with
// where to re-list from; a malformed since is 400.
func TestEventStreamCompacted(t *testing.T) {
	f := &fakeCluster{leader: true, events: events.New(events.Config{History: 3})}
	for i := uint64(1); i <= 10; i++ {
		f.events.Applied(i, []event.Event{{Index: i, Type: event.Acquired, Lock: "l", Token: i}})
	}
	srv := httptest.NewServer(newFakeServer(f).Handler())
	t.Cleanup(srv.Close) // after the streams close (cleanups run last first)
	resp := watchReq(t, srv.URL+"/v1/events?since=6", "")
	var body wire.Error
	if resp.StatusCode != http.StatusGone || json.NewDecoder(resp.Body).Decode(&body) != nil ||
		body.Code != wire.CodeEventsCompacted || body.Oldest != 7 || body.Index != 10 {
		t.Fatalf("since 6 with entries 8-10 kept: %d %+v", resp.StatusCode, body)
	}
	req, _ := http.NewRequest("GET", srv.URL+"/v1/events?since=0", nil)
	req.Header.Set(wire.HeaderLastEventID, "8") // wins over since
	resp2, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp2.Body.Close()
	got := readSSE(t, resp2.Body, func(evs []sseEvent) bool { return len(evs) == 2 })
	if resp2.StatusCode != 200 || got[0].id != "9" || got[1].id != "10" {
		t.Fatalf("Last-Event-ID 8: %d %+v", resp2.StatusCode, got)
	}
	if resp := watchReq(t, srv.URL+"/v1/events?since=-1", ""); resp.StatusCode != 400 {
		t.Fatalf("since=-1: %d", resp.StatusCode)
	}
}

// A reader that does not keep up is cut off with a last `lagged` event
// naming the last index it was sent; everything before it arrived, in
// order, with no gap, and apply never waited for it.
func TestEventStreamLaggedReader(t *testing.T) {
	f := &fakeCluster{leader: true, events: events.New(events.Config{Lag: 8})}
	srv := httptest.NewServer(newFakeServer(f).Handler())
	t.Cleanup(srv.Close) // after the streams close (cleanups run last first)
	resp := watchReq(t, srv.URL+"/v1/events?since=0", "")
	// The reader reads nothing while 200,000 entries apply: the socket
	// fills, the handler blocks on it, and it falls more than 8 behind.
	holder := strings.Repeat("h", 200)
	for i := uint64(1); i <= 200_000; i++ {
		f.events.Applied(i, []event.Event{{Index: i, Type: event.Acquired, Lock: "l", Holder: holder, Token: i}})
	}
	got := readSSE(t, resp.Body, nil)
	if len(got) < 1 {
		t.Fatalf("stream of %d events", len(got))
	}
	last := got[len(got)-1]
	if last.typ != wire.EventLagged {
		t.Fatalf("a reader 200,000 entries behind with a lag of 8 was not cut off: last event %+v of %d", last, len(got))
	}
	for i, e := range got[:len(got)-1] {
		if e.data.Index != uint64(i+1) {
			t.Fatalf("event %d has index %d: a gap or a repeat", i, e.data.Index)
		}
	}
	if n := uint64(len(got) - 1); last.data.Index != n || last.id != fmt.Sprint(n) {
		t.Fatalf("lagged after %d events says %+v", n, last)
	}
}
