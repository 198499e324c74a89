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

	prefix := r.URL.Query().Get("prefix")
	p, authenticated := acl.PrincipalFrom(r.Context())
	visible := func(e *fsm.Event) bool {
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

	// The stream outlives the server's write timeout, which bounds requests.
	rc := http.NewResponseController(w)
	rc.SetWriteDeadline(time.Time{})
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	bw := bufio.NewWriterSize(w, 16<<10)
	flush := func() error {
		if err := bw.Flush(); err != nil {
			return err
		}
		return rc.Flush()
	}
	var buf []byte
	var last uint64 // index of the last entry sent (or filtered out)
	send := func(entry []fsm.Event) {
		var shown []*fsm.Event
		for i := range entry {
			if visible(&entry[i]) {
				shown = append(shown, &entry[i])
			}
		}
		last = entry[0].Index
		for i, e := range shown {
			if i == len(shown)-1 {
				bw.WriteString("id: " + strconv.FormatUint(e.Index, 10) + "\n")
			}
			buf, _ = json.Marshal(wireEvent(e)) // cannot fail: plain fields
			bw.WriteString("event: " + e.Type + "\ndata: ")
			bw.Write(buf)
			bw.WriteString("\n\n")
		}
	}
	backlog := watcher.Backlog()
	for len(backlog) > 0 {
		n := 1
		for n < len(backlog) && backlog[n].Index == backlog[0].Index {
			n++
		}
		send(backlog[:n])
		backlog = backlog[n:]
		if bw.Buffered() > 8<<10 {
			if flush() != nil {
				return
			}
		}
	}
	if flush() != nil {
		return
	}
	keepAlive := time.NewTicker(s.keepAlive)
	defer keepAlive.Stop()
	for {
		select {
		case entry := <-watcher.C():
			send(entry)
		case <-watcher.Lagged():
			// What was buffered before the cut is still delivered.
			for drained := false; !drained; {
				select {
				case entry := <-watcher.C():
					send(entry)
				default:
					drained = true
				}
			}
			if last > 0 {
				bw.WriteString("id: " + strconv.FormatUint(last, 10) + "\n")
			}
			buf, _ = json.Marshal(wire.Event{Index: last, Type: wire.EventLagged})
			bw.WriteString("event: " + wire.EventLagged + "\ndata: ")
			bw.Write(buf)
			bw.WriteString("\n\n")
			flush()
			return
		case <-keepAlive.C:
			bw.WriteString(": keepalive\n\n")
		case <-r.Context().Done():
			return
		}
		if flush() != nil {
			return
		}
	}
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
