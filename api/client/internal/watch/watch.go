// Package watch keeps one Client.Watch going: it reads the members' event
// streams (Server-Sent Events), reconnects across members, and resumes
// after the last entry delivered in full, so that each event arrives once
// and in order.
package watch

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/fencer-io/fencer/api/client/internal/transport"
	"github.com/fencer-io/fencer/api/wire"
)

// FromNow, as since, starts the watch at the index the first member it
// reaches has applied (client.FromNow).
const FromNow = ^uint64(0)

// idleTimeout is how long a stream may stay silent before the client takes
// the connection for dead and reconnects. Members send a comment every 15s.
const idleTimeout = 45 * time.Second

// Run delivers to yield the events of GET /v1/events with an index above
// since (and, when prefix is not empty, a lock or key with that prefix),
// over as many connections as it takes, until ctx ends (its cause), the
// loop stops (nil), the members no longer keep the events after the last
// delivered index, a member refuses the watch (final), or
// Retry.Attempts connections in a row fail.
func Run(ctx context.Context, tr *transport.Transport, final func(error) bool, prefix string, since uint64, yield func(wire.Event, error) bool) error {
	w := &watch{tr: tr, cfg: tr.Config(), final: final, prefix: prefix, since: since, last: since}
	return w.run(ctx, yield)
}

// watch is the state of one Watch across its connections.
type watch struct {
	tr     *transport.Transport
	cfg    transport.Config
	final  func(error) bool // a refusal, which no reconnection changes
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
		eps := w.tr.Endpoints()
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
		// A refusal, or an answer that is not one (a malformed event would
		// come again on every reconnection), ends the watch.
		if w.final(err) || w.cfg.BadAnswer != nil && errors.Is(err, w.cfg.BadAnswer) {
			return fmt.Errorf("watch %q after index %d at %s: %w", w.prefix, w.last, base, err)
		}
		if connected {
			failures = 0
		}
		failures++
		if failures >= w.cfg.Retry.Attempts {
			return fmt.Errorf("watch %q after index %d: %d connections failed: %w: %w", w.prefix, w.last, failures, w.cfg.Unavailable, err)
		}
		pause := w.cfg.Retry.Backoff(failures)
		if w.retry > 0 {
			pause = w.retry
		}
		w.cfg.Log.Debug("fencer watch disconnected; reconnecting", "endpoint", base, "last_index", w.last, "err", err)
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
		st, err := w.tr.ClusterStatus(ctx, base)
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
	// idleTimeout.
	idle := time.AfterFunc(w.cfg.Timeout, cancel)
	defer idle.Stop()
	alive := func() { idle.Reset(idleTimeout) }
	resp, err := w.tr.Open(ctx, base, http.MethodGet, "/v1/events", q, h, nil)
	if err != nil {
		return false, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, wire.MaxBodyBytes))
		return false, w.cfg.AnswerError(base, resp.StatusCode, b)
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
		return false, fmt.Errorf("%w: malformed event %q: %w", w.cfg.BadAnswer, data, err)
	}
	if e.Type == "" {
		e.Type = ev.typ
	}
	if e.Type == wire.EventLagged {
		if e.Index > w.last {
			w.last = e.Index
		}
		w.cfg.Log.Debug("fencer watch lagged behind; resuming", "last_index", w.last)
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
			return false, fmt.Errorf("%w: malformed event id %q", w.cfg.BadAnswer, ev.id)
		}
		w.last, w.partial, w.skip = id, 0, 0
	}
	if !yield(e, nil) {
		return false, errStop
	}
	return false, nil
}
