// Package sse writes a node's events to a client as a stream of
// server-sent events: the backlog, then live entries, a comment line to keep
// an idle stream open, and a final `lagged` event when the reader fell
// behind.
//
// Only the last event of an entry carries the SSE id (the entry's index):
// an id then always means "everything up to this index was delivered", and
// a reader resuming from it neither misses nor repeats the rest of an entry
// (a restore voids several grants in one entry; other entries have one
// event).
package sse

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"time"

	"github.com/fencer-io/fencer/api/wire"
	"github.com/fencer-io/fencer/fsm/event"
)

// Watch is what a stream follows: a watch of the node's events
// (events.Watcher).
type Watch interface {
	// Backlog is the events kept before the watch began, in log order.
	Backlog() []event.Event
	// C delivers each new entry's events.
	C() <-chan []event.Event
	// Lagged is closed when the watch fell too far behind and was cut off.
	Lagged() <-chan struct{}
}

// Stream answers 200 and writes watch's events that visible shows until
// ctx ends, the client goes away or the watch is cut off, with a comment
// line every keepAlive while idle.
func Stream(ctx context.Context, w http.ResponseWriter, watch Watch, visible func(e *event.Event) bool, keepAlive time.Duration) {
	st := start(w, visible)
	if st.backlog(watch.Backlog()) != nil {
		return
	}
	tick := time.NewTicker(keepAlive)
	defer tick.Stop()
	for {
		select {
		case entry := <-watch.C():
			st.send(entry)
		case <-watch.Lagged():
			st.lagged(watch.C())
			return
		case <-tick.C:
			st.bw.WriteString(": keepalive\n\n")
		case <-ctx.Done():
			return
		}
		if st.flush() != nil {
			return
		}
	}
}

// stream writes server-sent events through a buffer.
type stream struct {
	bw      *bufio.Writer
	rc      *http.ResponseController
	visible func(e *event.Event) bool
	buf     []byte
	last    uint64 // index of the last entry sent (or filtered out)
}

// start answers 200 with the headers of an event stream.
func start(w http.ResponseWriter, visible func(e *event.Event) bool) *stream {
	// The stream outlives the server's write timeout, which bounds requests.
	rc := http.NewResponseController(w)
	rc.SetWriteDeadline(time.Time{})
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	return &stream{bw: bufio.NewWriterSize(w, 16<<10), rc: rc, visible: visible}
}

func (st *stream) flush() error {
	if err := st.bw.Flush(); err != nil {
		return err
	}
	return st.rc.Flush()
}

// send writes the visible events of one entry, the id on the last.
func (st *stream) send(entry []event.Event) {
	var shown []*event.Event
	for i := range entry {
		if st.visible(&entry[i]) {
			shown = append(shown, &entry[i])
		}
	}
	st.last = entry[0].Index
	for i, e := range shown {
		if i == len(shown)-1 {
			st.bw.WriteString("id: " + strconv.FormatUint(e.Index, 10) + "\n")
		}
		st.buf, _ = json.Marshal(wireEvent(e)) // cannot fail: plain fields
		st.bw.WriteString("event: " + e.Type + "\ndata: ")
		st.bw.Write(st.buf)
		st.bw.WriteString("\n\n")
	}
}

// backlog sends the events kept before the watch began, entry by entry,
// flushing every 8 KiB and at the end.
func (st *stream) backlog(events []event.Event) error {
	for len(events) > 0 {
		n := 1
		for n < len(events) && events[n].Index == events[0].Index {
			n++
		}
		st.send(events[:n])
		events = events[n:]
		if st.bw.Buffered() > 8<<10 {
			if err := st.flush(); err != nil {
				return err
			}
		}
	}
	return st.flush()
}

// lagged ends a stream cut off for falling behind: what was buffered before
// the cut is still delivered, then a lagged event naming the last index.
func (st *stream) lagged(c <-chan []event.Event) {
	for drained := false; !drained; {
		select {
		case entry := <-c:
			st.send(entry)
		default:
			drained = true
		}
	}
	if st.last > 0 {
		st.bw.WriteString("id: " + strconv.FormatUint(st.last, 10) + "\n")
	}
	st.buf, _ = json.Marshal(wire.Event{Index: st.last, Type: wire.EventLagged})
	st.bw.WriteString("event: " + wire.EventLagged + "\ndata: ")
	st.bw.Write(st.buf)
	st.bw.WriteString("\n\n")
	st.flush()
}

func wireEvent(e *event.Event) wire.Event {
	out := wire.Event{
		Index: e.Index, Type: e.Type, Lock: e.Lock, Holder: e.Holder, Token: e.Token,
		PrevHolder: e.PrevHolder, PrevToken: e.PrevToken, Reason: e.Reason,
		Key: e.Key, Member: e.Member, Epoch: e.Epoch, Value: e.Value,
	}
	if e.Type == event.Put {
		size := e.ValueSize
		out.ValueSize = &size
	}
	if e.Semaphore != "" {
		held := e.Held
		out.Semaphore, out.Limit, out.Held = e.Semaphore, e.Limit, &held
	}
	return out
}
