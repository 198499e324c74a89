package client

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/fencer-io/fencer/api/client/internal/transport"
	"github.com/fencer-io/fencer/api/wire"
)

// FromNow, as Watch's since, starts the watch at the index the first member
// it reaches has applied: only changes from then on are delivered.
const FromNow = ^uint64(0)

// watchIdle is how long a stream may stay silent before the client takes the
// connection for dead and reconnects. Members send a comment every 15s.
const watchIdle = 45 * time.Second

// Watch streams the cluster's events (GET /v1/events) with an index above
// since, in log order, then follows new ones as they are applied; prefix,
// when not empty, keeps only locks and keys with that prefix. since is
// usually the Fencer-Index of a list (list, then watch: no gap, no
// duplicate), the index of the last event seen, or FromNow.
//
//	for ev, err := range c.Watch(ctx, "jobs.", client.FromNow) {
//		if err != nil {
//			return err
//		}
//		fmt.Println(ev.Index, ev.Type, ev.Lock, ev.Token)
//	}
//
// Any member serves events from its own applied log, and every member emits
// the same events with the same indexes. So when a connection fails, the
// member goes away or cuts a slow reader off (lagged), Watch reconnects, to
// the next endpoint, with Last-Event-ID set to the last index it delivered
// in full: each event arrives once, in order, across reconnections. Event
// types this client does not know are delivered as they are; skip them.
//
// The sequence ends when ctx ends (yielding its error), when the loop
// stops, or with a final error: one wrapping ErrEventsCompacted when the
// members no longer keep the events after the last delivered index (an
// *APIError whose Index is the index to re-list at; re-list, then watch from
// the list's index), ErrUnavailable when Retry.Attempts connections in a row
// failed, or another *APIError (ErrForbidden, ErrInvalid, …).
func (c *Client) Watch(ctx context.Context, prefix string, since uint64) iter.Seq2[wire.Event, error] {
	return func(yield func(wire.Event, error) bool) {
		w := &watch{c: c, prefix: prefix, since: since, last: since}
		if err := w.run(ctx, yield); err != nil {
			yield(wire.Event{}, err)
		}
	}
}

// LocksAt returns every held lock and the log index the list was read at
// (Fencer-Index). Watch from that index then delivers every change after
// the list and none the list already shows: list, then watch.
func (c *Client) LocksAt(ctx context.Context) ([]wire.LockStatus, uint64, error) {
	resp, err := c.tr.Do(ctx, &transport.Request{Method: http.MethodGet, Path: "/v1/locks"})
	if err != nil {
		return nil, 0, err
	}
	var list wire.LockList
	if err := transport.Decode(resp, &list); err != nil {
		return nil, 0, err
	}
	index, err := strconv.ParseUint(resp.Header.Get(wire.HeaderIndex), 10, 64)
	if err != nil {
		return nil, 0, fmt.Errorf("GET /v1/locks: answer has no valid %s header", wire.HeaderIndex)
	}
	return list.Locks, index, nil
}

// watch is the state of one Watch across its connections.
type watch struct {
	c      *Client
	prefix string
	since  uint64 // as asked: the since parameter of every request
	last   uint64 // index of the last entry delivered in full
	// partial counts the events of entry partialIndex delivered without its
	// id: only an entry's last event carries one, so a stream cut in the
	// middle of an entry is resumed from before it, and skip drops the
	// events of it the caller already has.
	partialIndex, partial, skip uint64
	retry                       time.Duration // the server's retry: field
}

// errStop ends run when the caller's loop stops.
var errStop = errors.New("watch stopped")

func (w *watch) run(ctx context.Context, yield func(wire.Event, error) bool) error {
	failures := 0
	for attempt := 0; ; attempt++ {
		if err := ctx.Err(); err != nil {
			return context.Cause(ctx)
		}
		eps := w.c.tr.Endpoints()
		base := eps[attempt%len(eps)]
		connected, err := w.stream(ctx, base, yield)
		switch {
		case errors.Is(err, errStop):
			return nil
		case ctx.Err() != nil:
			return context.Cause(ctx)
		case err == nil:
			// Lagged: resume at once, from where the member stopped.
			failures = 0
			continue
		}
		var api *APIError
		if errors.As(err, &api) && api.Status < 500 {
			return fmt.Errorf("watch %q after index %d at %s: %w", w.prefix, w.last, base, err)
		}
		if connected {
			failures = 0
		}
		failures++
		if failures >= w.c.retry.Attempts {
			return fmt.Errorf("watch %q after index %d: %d connections failed: %w: %w", w.prefix, w.last, failures, ErrUnavailable, err)
		}
		pause := w.c.retry.backoff(failures)
		if w.retry > 0 {
			pause = w.retry
		}
		w.c.log.Debug("fencer watch disconnected; reconnecting", "endpoint", base, "last_index", w.last, "err", err)
		if transport.Sleep(ctx, pause) != nil {
			return context.Cause(ctx)
		}
	}
}

// stream makes one connection to base and delivers its events. It returns
// nil after a lagged event (resume now), errStop when the caller stopped,
// and otherwise why the stream ended; connected reports whether base
// answered 200.
//
// It is long because one SSE read loop (ids, events, lagged, keep-alives)
// reads best whole.
func (w *watch) stream(ctx context.Context, base string, yield func(wire.Event, error) bool) (connected bool, err error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if w.since == FromNow {
		// Resolved once, so that a reconnection resumes from the same
		// place whatever member it reaches.
		st, err := w.c.tr.ClusterStatus(ctx, base)
		if err != nil {
			return false, err
		}
		w.since, w.last = st.AppliedIndex, st.AppliedIndex
	}
	q := url.Values{"since": {strconv.FormatUint(w.since, 10)}}
	if w.prefix != "" {
		q.Set("prefix", w.prefix)
	}
	h := http.Header{}
	h.Set("Accept", "text/event-stream")
	h.Set(wire.HeaderLastEventID, strconv.FormatUint(w.last, 10))
	// A silent connection is cancelled: the answer must start within the
	// client's timeout, and the stream must not go quiet for longer than
	// watchIdle.
	idle := time.AfterFunc(w.c.timeout, cancel)
	defer idle.Stop()
	alive := func() { idle.Reset(watchIdle) }
	resp, err := w.c.tr.Open(ctx, base, http.MethodGet, "/v1/events", q, h, nil)
	if err != nil {
		return false, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, wire.MaxBodyBytes))
		return false, answerError(base, resp.StatusCode, b)
	}
	alive()
	w.skip, w.partial = w.partial, 0

	lines := bufio.NewScanner(resp.Body)
	lines.Buffer(make([]byte, 0, 4<<10), wire.MaxBodyBytes)
	lines.Split(scanLines)
	var ev sseEvent
	for lines.Scan() {
		alive()
		if !ev.line(lines.Bytes()) {
			continue
		}
		if ev.retry > 0 {
			w.retry = ev.retry
		}
		idle.Stop() // the caller may take its time with an event
		done, err := w.deliver(ev, yield)
		alive()
		ev = sseEvent{}
		if done || err != nil {
			return true, err
		}
	}
	if err := lines.Err(); err != nil {
		return true, err
	}
	return true, io.ErrUnexpectedEOF
}

// deliver hands one dispatched SSE event to the caller. done (with a nil
// error) means the member cut the stream off as lagged.
func (w *watch) deliver(ev sseEvent, yield func(wire.Event, error) bool) (done bool, err error) {
	data := bytes.TrimSuffix(ev.data, []byte("\n"))
	if len(data) == 0 {
		return false, nil // nothing to deliver, e.g. a bare retry: field
	}
	var e wire.Event
	if err := json.Unmarshal(data, &e); err != nil {
		return false, fmt.Errorf("malformed event %q: %w", data, err)
	}
	if e.Type == "" {
		e.Type = ev.typ
	}
	if e.Type == wire.EventLagged {
		if e.Index > w.last {
			w.last = e.Index
		}
		w.c.log.Debug("fencer watch lagged behind; resuming", "last_index", w.last)
		return true, nil
	}
	if !ev.hasID {
		if e.Index != w.partialIndex {
			w.partialIndex, w.partial = e.Index, 0
		}
		w.partial++
		if w.skip > 0 && e.Index == w.partialIndex {
			w.skip--
			return false, nil // delivered before the reconnection
		}
	} else {
		id, err := strconv.ParseUint(ev.id, 10, 64)
		if err != nil {
			return false, fmt.Errorf("malformed event id %q", ev.id)
		}
		w.last, w.partial, w.skip = id, 0, 0
	}
	if !yield(e, nil) {
		return false, errStop
	}
	return false, nil
}

// sseEvent gathers the fields of one Server-Sent Event, line by line.
type sseEvent struct {
	typ   string
	data  []byte
	id    string
	hasID bool
	retry time.Duration
}

// line adds one line of the stream and reports whether it ended the event
// (a blank line). Comments (":…") are skipped, and so are fields this client
// does not use. Unlike a browser, the id takes effect only when its event is
// complete: a stream cut between an id and its event's end must resume
// before that event, not after it.
func (ev *sseEvent) line(b []byte) bool {
	if len(b) == 0 {
		return true
	}
	if b[0] == ':' {
		return false
	}
	field, value, _ := bytes.Cut(b, []byte(":"))
	value = bytes.TrimPrefix(value, []byte(" "))
	switch string(field) {
	case "event":
		ev.typ = string(value)
	case "data":
		ev.data = append(append(ev.data, value...), '\n')
	case "id":
		if bytes.IndexByte(value, 0) < 0 {
			ev.id, ev.hasID = string(value), true
		}
	case "retry":
		if ms, err := strconv.ParseUint(string(value), 10, 32); err == nil {
			ev.retry = time.Duration(ms) * time.Millisecond
		}
	}
	return false
}

// scanLines splits an event stream into lines ended by "\r\n", "\n" or "\r".
func scanLines(data []byte, atEOF bool) (int, []byte, error) {
	i := bytes.IndexAny(data, "\r\n")
	switch {
	case i < 0 && atEOF && len(data) > 0:
		// An unfinished line at the end is dropped with its event.
		return len(data), nil, nil
	case i < 0:
		return 0, nil, nil
	case data[i] == '\n':
		return i + 1, data[:i], nil
	case i+1 < len(data):
		if data[i+1] == '\n' {
			return i + 2, data[:i], nil
		}
		return i + 1, data[:i], nil
	case atEOF:
		return i + 1, data[:i], nil
	}
	return 0, nil, nil // a "\r" last: wait to see whether "\n" follows
}
