// Package sse writes a node's events to a client as a stream of
// server-sent events: batches read from the node's history, a comment line
// to keep an idle stream open, and a final `lagged` event when the reader
// fell behind.
//
// Only the last event of an entry carries the SSE id (the entry's index):
// an id then always means "everything up to this index was delivered", and
// a reader resuming from it neither misses nor repeats the rest of an entry
// (a restore voids several grants in one entry; other entries have one
// event).
//
// What a stream holds is bounded whatever its reader does: one batch of
// events and its encoding, never the history. Every write has a deadline,
// so a reader that stops reading costs its connection for WriteTimeout at
// most; one that reads too slowly to keep up is cut off by the history
// (events.ErrLagged) with a last `lagged` event saying where to resume.
package sse

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/fencer-io/fencer/api/wire"
	"github.com/fencer-io/fencer/fsm/event"
)

// Watch is what a stream follows: a watch of the node's events
// (events.Watcher).
type Watch interface {
	// Next returns the events after those it returned last, a batch of
	// whole entries up to cap(buf), or none and a channel closed once there
	// may be more; an error (events.ErrLagged) ends the stream.
	Next(buf []event.Event) ([]event.Event, <-chan struct{}, error)
	// Resume is the index a cut-off reader resumes from.
	Resume() uint64
}

// Scope says which events a stream shows, and returns a channel closed
// when it must be asked again (the ACL was reloaded). A nil visible ends the
// stream: its reader may no longer watch.
type Scope func() (visible func(e *event.Event) bool, changed <-chan struct{})

// Config is how a stream is written. KeepAlive and WriteTimeout must be
// positive.
type Config struct {
	// KeepAlive is how often an idle stream gets a comment line.
	KeepAlive time.Duration
	// WriteTimeout bounds each write: a reader that has not taken one
	// within it is gone, and the connection is closed.
	WriteTimeout time.Duration
}

// batchEvents is how many events a stream reads from the history at a
// time: small, since an unread stream holds its batch and its encoding,
// and large enough that a backlog goes out in few writes.
const batchEvents = 32

// Stream answers 200 and writes watch's events that scope shows until ctx
// ends, the client goes away or stops reading for WriteTimeout, the watch
// is cut off (a final lagged event), or scope ends it (the stream just
// closes: a reconnection is refused, and says why).
func Stream(ctx context.Context, w http.ResponseWriter, watch Watch, scope Scope, cfg Config) {
	visible, changed := scope()
	if visible == nil {
		return
	}
	st := start(w, cfg.WriteTimeout)
	if st.flush() != nil {
		return
	}
	buf := make([]event.Event, 0, batchEvents)
	tick := time.NewTicker(cfg.KeepAlive)
	defer tick.Stop()
	for {
		select {
		case <-changed:
			if visible, changed = scope(); visible == nil {
				return
			}
		default:
		}
		batch, more, err := watch.Next(buf)
		switch {
		case err != nil:
			st.lagged(watch.Resume())
			st.flush()
			return
		case len(batch) > 0:
			st.send(batch, visible)
			clear(batch) // let the events' strings go while the write waits
		default:
			select {
			case <-more:
				continue
			case <-changed:
				continue
			case <-tick.C:
				st.out = append(st.out, ": keepalive\n\n"...)
			case <-ctx.Done():
				return
			}
		}
		if st.flush() != nil {
			return
		}
	}
}

// stream writes server-sent events, a batch at a time.
type stream struct {
	w            http.ResponseWriter
	rc           *http.ResponseController
	writeTimeout time.Duration
	out          []byte // the encoding of what is not written yet
}

// start sets the headers of an event stream.
func start(w http.ResponseWriter, writeTimeout time.Duration) *stream {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	return &stream{w: w, rc: http.NewResponseController(w), writeTimeout: writeTimeout}
}

// flush writes what is encoded within the write deadline (which replaces
// the server's, meant for requests, not streams).
func (st *stream) flush() error {
	if err := st.rc.SetWriteDeadline(time.Now().Add(st.writeTimeout)); err != nil && !errors.Is(err, http.ErrNotSupported) {
		return err
	}
	if len(st.out) > 0 {
		if _, err := st.w.Write(st.out); err != nil {
			return err
		}
		st.out = st.out[:0]
		if cap(st.out) > 64<<10 {
			st.out = nil // a restore's entry of many events; not kept
		}
	}
	return st.rc.Flush()
}

// send encodes the visible events of whole entries, the id on the last
// shown event of each.
func (st *stream) send(batch []event.Event, visible func(e *event.Event) bool) {
	for len(batch) > 0 {
		n := 1
		for n < len(batch) && batch[n].Index == batch[0].Index {
			n++
		}
		last := -1
		for i := range batch[:n] {
			if visible(&batch[i]) {
				last = i
			}
		}
		for i := range batch[:last+1] {
			e := &batch[i]
			if !visible(e) {
				continue
			}
			if i == last {
				st.out = append(st.out, "id: "...)
				st.out = strconv.AppendUint(st.out, e.Index, 10)
				st.out = append(st.out, '\n')
			}
			st.event(e.Type, wireEvent(e))
		}
		batch = batch[n:]
	}
}

func (st *stream) event(typ string, e wire.Event) {
	data, _ := json.Marshal(e) // cannot fail: plain fields
	st.out = append(st.out, "event: "...)
	st.out = append(st.out, typ...)
	st.out = append(st.out, "\ndata: "...)
	st.out = append(st.out, data...)
	st.out = append(st.out, "\n\n"...)
}

// lagged ends a stream cut off for falling behind with a lagged event
// naming the index to resume from: every event up to it was sent.
func (st *stream) lagged(resume uint64) {
	st.out = append(st.out, "id: "...)
	st.out = strconv.AppendUint(st.out, resume, 10)
	st.out = append(st.out, '\n')
	st.event(wire.EventLagged, wire.Event{Index: resume, Type: wire.EventLagged})
}

func wireEvent(e *event.Event) wire.Event {
	out := wire.Event{
		Index: e.Index, Type: e.Type, Lock: e.Lock, Holder: e.Holder, Token: e.Token,
		PrevHolder: e.PrevHolder, PrevToken: e.PrevToken, Reason: e.Reason,
		Key: e.Key, Member: e.Member, Epoch: e.Epoch, Value: e.Value, Session: e.Session,
		Mode: e.Mode, WaitIndex: e.WaitIndex,
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
