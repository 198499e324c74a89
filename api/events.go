package api

import (
	"bufio"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/fencer-io/fencer/api/wire"
	"github.com/fencer-io/fencer/fsm"
	"github.com/fencer-io/fencer/internal/acl"
)

// events streams this node's events as Server-Sent Events: every event
// after ?since= (or Last-Event-ID, which wins), in log order, then live;
// without either, from the node's applied index. Any node answers from its
// own applied state, so it is never forwarded.
//
// Only the last event of an entry carries the SSE id (the entry's index):
// an id then always means "everything up to this index was delivered", and
// a reader resuming from it neither misses nor repeats the rest of an entry
// (a restore voids several grants in one entry; other entries have one
// event). A reader that falls more than its buffer behind gets a final
// `lagged` event naming the last index it was sent, and the stream ends.
func (s *Server) events(w http.ResponseWriter, r *http.Request) {
	since, err := watchSince(r)
	if err != nil {
		writeErr(w, err)
		return
	}
	watcher, err := s.co.Watch(since)
	if err != nil {
		writeErr(w, err)
		return
	}
	defer watcher.Close()

	st := newEventStream(w, visibleEvents(r))
	if st.backlog(watcher.Backlog()) != nil {
		return
	}
	keepAlive := time.NewTicker(s.keepAlive)
	defer keepAlive.Stop()
	for {
		select {
		case entry := <-watcher.C():
			st.send(entry)
		case <-watcher.Lagged():
			st.lagged(watcher.C())
			return
		case <-keepAlive.C:
			st.bw.WriteString(": keepalive\n\n")
		case <-r.Context().Done():
			return
		}
		if st.flush() != nil {
			return
		}
	}
}

// visibleEvents says which events the request's stream shows: those under
// its ?prefix= that its principal may read (events of neither a lock nor a
// key, such as a member's, only without a prefix, to those who may read
// status).
func visibleEvents(r *http.Request) func(e *fsm.Event) bool {
	prefix := r.URL.Query().Get("prefix")
	p, authenticated := acl.PrincipalFrom(r.Context())
	return func(e *fsm.Event) bool {
		switch {
		case e.Lock != "":
			return strings.HasPrefix(e.Lock, prefix) && (!authenticated || acl.Allow(p, acl.ActionReadLock, e.Lock))
		case e.Key != "":
			return strings.HasPrefix(e.Key, prefix) && (!authenticated || acl.Allow(p, acl.ActionReadKey, e.Key))
		case e.Semaphore != "":
			// Semaphores follow a token's lock prefixes.
			return strings.HasPrefix(e.Semaphore, prefix) && (!authenticated || acl.Allow(p, acl.ActionReadLock, e.Semaphore))
		}
		return prefix == "" && (!authenticated || acl.Allow(p, acl.ActionStatus, ""))
	}
}

// eventStream writes server-sent events through a buffer.
type eventStream struct {
	bw      *bufio.Writer
	rc      *http.ResponseController
	visible func(e *fsm.Event) bool
	buf     []byte
	last    uint64 // index of the last entry sent (or filtered out)
}

// newEventStream answers 200 with the headers of an event stream.
func newEventStream(w http.ResponseWriter, visible func(e *fsm.Event) bool) *eventStream {
	// The stream outlives the server's write timeout, which bounds requests.
	rc := http.NewResponseController(w)
	rc.SetWriteDeadline(time.Time{})
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	return &eventStream{bw: bufio.NewWriterSize(w, 16<<10), rc: rc, visible: visible}
}

func (st *eventStream) flush() error {
	if err := st.bw.Flush(); err != nil {
		return err
	}
	return st.rc.Flush()
}

// send writes the visible events of one entry, the id on the last.
func (st *eventStream) send(entry []fsm.Event) {
	var shown []*fsm.Event
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
func (st *eventStream) backlog(events []fsm.Event) error {
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
func (st *eventStream) lagged(c <-chan []fsm.Event) {
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

// watchSince reads where a watch starts: Last-Event-ID, else ?since=, else
// -1 (the node's applied index).
func watchSince(r *http.Request) (int64, error) {
	raw, what := r.Header.Get(wire.HeaderLastEventID), wire.HeaderLastEventID
	if raw == "" {
		raw, what = r.URL.Query().Get("since"), "since"
	}
	if raw == "" {
		return -1, nil
	}
	n, err := strconv.ParseInt(raw, 10, 64)
	if err != nil || n < 0 {
		return 0, badRequest(wire.CodeInvalidIndex, what+": want a log index, a decimal integer ≥ 0")
	}
	return n, nil
}

func wireEvent(e *fsm.Event) wire.Event {
	out := wire.Event{
		Index: e.Index, Type: e.Type, Lock: e.Lock, Holder: e.Holder, Token: e.Token,
		PrevHolder: e.PrevHolder, PrevToken: e.PrevToken, Reason: e.Reason,
		Key: e.Key, Member: e.Member, Epoch: e.Epoch, Value: e.Value,
	}
	if e.Type == fsm.EventPut {
		size := e.ValueSize
		out.ValueSize = &size
	}
	if e.Semaphore != "" {
		held := e.Held
		out.Semaphore, out.Limit, out.Held = e.Semaphore, e.Limit, &held
	}
	return out
}
