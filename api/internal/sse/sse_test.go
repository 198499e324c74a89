package sse

import (
	"context"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/fencer-io/fencer/fsm/event"
)

type watch struct {
	backlog []event.Event
	c       chan []event.Event
	lagged  chan struct{}
}

func (w *watch) Backlog() []event.Event  { return w.backlog }
func (w *watch) C() <-chan []event.Event { return w.c }
func (w *watch) Lagged() <-chan struct{} { return w.lagged }
func lines(body string) []string         { return strings.Split(strings.TrimSpace(body), "\n") }
func shown(e *event.Event) bool          { return e.Lock != "hidden" }
func ev(index uint64, typ, lock string) event.Event {
	return event.Event{Index: index, Type: typ, Lock: lock}
}

// Only the last shown event of an entry carries the id, so that resuming
// from an id neither repeats nor misses the rest of its entry; an entry
// whose events are all hidden still moves the lagged event's index on; a
// cut-off reader first gets what was buffered, then `lagged` with the id
// of the last entry it was sent.
func TestStreamIDsAndLagged(t *testing.T) {
	w := &watch{
		backlog: []event.Event{ev(3, event.Voided, "a"), ev(3, event.Voided, "b")},
		c:       make(chan []event.Event, 2),
		lagged:  make(chan struct{}),
	}
	w.c <- []event.Event{ev(4, event.Acquired, "c")}
	w.c <- []event.Event{ev(5, event.Acquired, "hidden")}
	close(w.lagged)
	rec := httptest.NewRecorder()
	Stream(context.Background(), rec, w, shown, time.Minute)
	got := strings.Join(lines(rec.Body.String()), "|")
	var ids []string
	for _, l := range lines(rec.Body.String()) {
		if strings.HasPrefix(l, "id: ") {
			ids = append(ids, l[4:])
		}
	}
	if strings.Join(ids, ",") != "3,4,5" || !strings.HasSuffix(got, `event: lagged|data: {"index":5,"type":"lagged"}`) {
		t.Fatalf("ids %v in stream\n%s", ids, rec.Body.String())
	}
	if rec.Header().Get("Content-Type") != "text/event-stream" {
		t.Fatalf("content type %q", rec.Header().Get("Content-Type"))
	}
}
