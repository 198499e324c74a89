package sse

import (
	"context"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/fencer-io/fencer/fsm"
)

type watch struct {
	backlog []fsm.Event
	c       chan []fsm.Event
	lagged  chan struct{}
}

func (w *watch) Backlog() []fsm.Event    { return w.backlog }
func (w *watch) C() <-chan []fsm.Event   { return w.c }
func (w *watch) Lagged() <-chan struct{} { return w.lagged }
func lines(body string) []string         { return strings.Split(strings.TrimSpace(body), "\n") }
func shown(e *fsm.Event) bool            { return e.Lock != "hidden" }
func ev(index uint64, typ, lock string) fsm.Event {
	return fsm.Event{Index: index, Type: typ, Lock: lock}
}

// Only the last shown event of an entry carries the id, so that resuming
// from an id neither repeats nor misses the rest of its entry; an entry
// whose events are all hidden still moves the lagged event's index on; a
// cut-off reader first gets what was buffered, then `lagged` with the id
// of the last entry it was sent.
func TestStreamIDsAndLagged(t *testing.T) {
	w := &watch{
		backlog: []fsm.Event{ev(3, fsm.EventVoided, "a"), ev(3, fsm.EventVoided, "b")},
		c:       make(chan []fsm.Event, 2),
		lagged:  make(chan struct{}),
	}
	w.c <- []fsm.Event{ev(4, fsm.EventAcquired, "c")}
	w.c <- []fsm.Event{ev(5, fsm.EventAcquired, "hidden")}
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
