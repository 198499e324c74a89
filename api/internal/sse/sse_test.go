package sse

import (
	"context"
	"errors"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/fencer-io/fencer/fsm/event"
)

// watch returns its events one entry at a time, then ErrLagged.
type watch struct {
	events []event.Event
	next   uint64
}

func (w *watch) Next(buf []event.Event) ([]event.Event, <-chan struct{}, error) {
	if len(w.events) == 0 {
		return nil, nil, errors.New("lagged")
	}
	n := 1
	for n < len(w.events) && w.events[n].Index == w.events[0].Index {
		n++
	}
	out := append(buf[:0], w.events[:n]...)
	w.events, w.next = w.events[n:], out[0].Index
	return out, nil, nil
}
func (w *watch) Resume() uint64  { return w.next }
func lines(body string) []string { return strings.Split(strings.TrimSpace(body), "\n") }
func all() (func(e *event.Event) bool, <-chan struct{}) {
	return func(e *event.Event) bool { return e.Lock != "hidden" }, nil
}
func ev(index uint64, typ, lock string) event.Event {
	return event.Event{Index: index, Type: typ, Lock: lock}
}

// Only the last shown event of an entry carries the id, so that resuming
// from an id neither repeats nor misses the rest of its entry; an entry
// whose events are all hidden still moves the lagged event's index on; a
// cut-off reader first gets what was buffered, then `lagged` with the id
// of the last entry it was sent.
func TestStreamIDsAndLagged(t *testing.T) {
	w := &watch{events: []event.Event{ev(3, event.Voided, "a"), ev(3, event.Voided, "b"), ev(4, event.Acquired, "c"), ev(5, event.Acquired, "hidden")}}
	rec := httptest.NewRecorder()
	Stream(context.Background(), rec, w, all, Config{KeepAlive: time.Minute, WriteTimeout: time.Minute})
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
