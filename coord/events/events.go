// Package events is a node's event history: the FSM's observer, which keeps
// the events of the last applied entries and fans each new entry's events
// out to the watchers that follow them (GET /v1/events). Every node applies
// the same log, so every node emits the same events under the same indexes.
package events

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/fencer-io/fencer/fsm/event"
)

// Defaults of Config.
const (
	DefaultHistory = 100_000
	DefaultBuffer  = 4096
)

// ErrCompacted: a watch asked for events older than the node keeps (see
// CompactedError).
var ErrCompacted = errors.New("events compacted")

// Config sizes a node's event history. Zero values mean the defaults.
type Config struct {
	// History is how many log entries' events are kept in memory.
	History int
	// Buffer is how many entries a watcher may fall behind the log before
	// it is cut off with ErrLagged.
	Buffer int
}

// CompactedError is returned to a watcher that asks for events older than
// the node still keeps: it must re-list (at Index or later) and watch from
// there.
type CompactedError struct {
	// Oldest is the lowest since the node can still serve.
	Oldest uint64
	// Index is the node's applied index.
	Index uint64
}

func (e *CompactedError) Error() string {
	return fmt.Sprintf("%v: this node keeps events after index %d only (applied index %d); re-list and watch from the list's index", ErrCompacted, e.Oldest, e.Index)
}

func (e *CompactedError) Unwrap() error { return ErrCompacted }

// History is a node's event history: the events of its last applied entries,
// in log order, and the watchers following them. It is the FSM's observer,
// so it sees exactly what the node applies, in order, and so does every
// other node: an event's index is its entry's, the same everywhere.
//
// Apply never waits for a watcher: each has a bounded buffer of entries and
// is cut off (Lagged) when it fills, as etcd moves slow watchers aside.
type History struct {
	cfg Config

	mu sync.Mutex
	// ring holds every event with an index above floor, in index order.
	ring     ring
	floor    uint64
	last     uint64 // last applied index seen
	watchers map[*Watcher]struct{}
}

// New returns an empty history; hand it to fsm.FSM.Observe before
// the FSM applies anything.
func New(cfg Config) *History {
	if cfg.History <= 0 {
		cfg.History = DefaultHistory
	}
	if cfg.Buffer <= 0 {
		cfg.Buffer = DefaultBuffer
	}
	return &History{cfg: cfg, watchers: map[*Watcher]struct{}{}}
}

// Applied implements event.Observer.
func (h *History) Applied(index uint64, events []event.Event) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if index <= h.last {
		return
	}
	h.last = index
	if len(events) > 0 {
		h.ring.push(events)
		for w := range h.watchers {
			w.offer(h, events)
		}
	}
	h.trim()
}

// Restored implements event.Observer. A snapshot that does not follow the
// last applied entry leaves a gap no event describes: the history starts
// over after it and watchers are cut off (they will resume, be told the
// history is compacted, and re-list).
func (h *History) Restored(index uint64, boot bool, events []event.Event) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if boot || index != h.last+1 {
		h.ring.reset()
		h.floor = index
		if len(events) > 0 {
			h.floor = index - 1
		}
		for w := range h.watchers {
			h.cut(w)
		}
	}
	h.last = max(h.last, index)
	if len(events) > 0 {
		h.ring.push(events)
		for w := range h.watchers {
			w.offer(h, events)
		}
	}
}

// trim forgets the events of entries more than History behind the last.
func (h *History) trim() {
	keep := uint64(h.cfg.History)
	if h.last <= keep || h.last-keep <= h.floor {
		return
	}
	h.floor = h.last - keep
	h.ring.dropThrough(h.floor)
}

// Index returns the last applied index the history has seen.
func (h *History) Index() uint64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.last
}

// Oldest returns the lowest since that Watch still accepts.
func (h *History) Oldest() uint64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.floor
}

// Watch returns a watcher of every event with an index above since, in
// order; since < 0 starts at the last applied index. It fails with a
// *CompactedError when events after since are no longer kept.
func (h *History) Watch(since int64) (*Watcher, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	from := h.last
	if since >= 0 {
		from = uint64(since)
		if from < h.floor {
			return nil, &CompactedError{Oldest: h.floor, Index: h.last}
		}
	}
	w := &Watcher{h: h, from: from, c: make(chan []event.Event, h.cfg.Buffer), done: make(chan struct{})}
	// The backlog is copied now, under the lock that orders it before
	// every live entry offered later.
	w.backlog = h.ring.since(from)
	h.watchers[w] = struct{}{}
	return w, nil
}

// Watcher follows a node's events. Next returns them one entry at a time.
type Watcher struct {
	from    uint64
	backlog []event.Event
	c       chan []event.Event
	done    chan struct{} // closed when cut off
	h       *History
}

// offer queues one entry's events; under h.mu. A full buffer cuts the
// watcher off.
func (w *Watcher) offer(h *History, events []event.Event) {
	if events[0].Index <= w.from {
		return
	}
	select {
	case w.c <- events:
	default:
		h.cut(w)
	}
}

// cut ends w as lagged; under h.mu.
func (h *History) cut(w *Watcher) {
	delete(h.watchers, w)
	close(w.done)
}

// Backlog returns the events that were already kept when the watch began,
// in order, once; Next delivers the rest.
func (w *Watcher) Backlog() []event.Event {
	b := w.backlog
	w.backlog = nil
	return b
}

// C delivers the events of each later entry, in order.
func (w *Watcher) C() <-chan []event.Event { return w.c }

// Lagged is closed when the watcher was cut off because it fell more than
// its buffer behind (or the node's state was replaced): whatever C still
// holds is delivered first, then the watcher must resume from the last
// index it delivered.
func (w *Watcher) Lagged() <-chan struct{} { return w.done }

// Close stops the watcher.
func (w *Watcher) Close() {
	w.h.mu.Lock()
	delete(w.h.watchers, w)
	w.h.mu.Unlock()
}

// WaitFor returns once an event that match accepts is applied after index,
// when wait ends, ctx ends (its error) or stop is closed, or at once when
// the events after index are no longer kept (one may have been missed: a
// spurious wake-up, as Consul's blocking queries allow). It says whether
// it saw such an event, or may have.
func (h *History) WaitFor(ctx context.Context, index uint64, wait time.Duration, stop <-chan struct{}, match func(*event.Event) bool) (bool, error) {
	w, err := h.Watch(int64(min(index, 1<<62)))
	var compacted *CompactedError
	if errors.As(err, &compacted) {
		return true, nil
	}
	if err != nil {
		return false, err
	}
	defer w.Close()
	matches := func(entry []event.Event) bool {
		for i := range entry {
			if match(&entry[i]) {
				return true
			}
		}
		return false
	}
	if matches(w.Backlog()) {
		return true, nil
	}
	timer := time.NewTimer(wait)
	defer timer.Stop()
	for {
		select {
		case entry := <-w.C():
			if matches(entry) {
				return true, nil
			}
		case <-w.Lagged():
			return true, nil
		case <-timer.C:
			return false, nil
		case <-ctx.Done():
			return false, ctx.Err()
		case <-stop:
			return false, nil
		}
	}
}
