// Package events is a node's event history: the FSM's observer, which keeps
// the events of the last applied entries for the watchers that follow them
// (GET /v1/events) and wakes the blocking reads waiting for a lock to change
// (GET /v1/locks/NAME?wait_index=N). Every node applies the same log, so
// every node emits the same events under the same indexes.
//
// Why it is built this way: a watcher is a cursor, an index into the one
// history every watcher shares. It never holds a copy of the history and has
// no queue of its own, so what a watcher costs does not depend on how far
// behind it is, and applying an entry costs the same with a thousand
// watchers as with none (it closes one channel). A watcher that falls more
// than Config.Lag events behind is cut off with ErrLagged, to resume from
// where it stopped, as etcd moves slow watchers aside; a blocking read
// finds whether its lock changed by index (the newest event of each lock)
// and parks on that lock alone.
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
	// DefaultLag is well below DefaultHistory, so that a watcher cut off
	// for lagging can resume where it stopped: the events after it are
	// still kept.
	DefaultLag = 10_000
)

// Errors of a Watcher.
var (
	// ErrCompacted: a watch asked for events older than the node keeps
	// (see CompactedError).
	ErrCompacted = errors.New("events compacted")
	// ErrLagged: the watcher fell more than Config.Lag events behind, or
	// the events after it were dropped (a snapshot replaced the state); it
	// must resume from Watcher.Resume.
	ErrLagged = errors.New("watcher lagged")
)

// Config sizes a node's event history. Zero values mean the defaults.
type Config struct {
	// History is how many log entries' events are kept in memory.
	History int
	// Lag is how many events a watcher may have left to read, counting
	// those applied since it began or since the last entry it read,
	// whichever is later, before it is cut off with ErrLagged. It costs no
	// memory (watchers share the history); it bounds how stale a slow
	// reader's view may grow.
	Lag int
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
// in log order. It is the FSM's observer, so it sees exactly what the node
// applies, in order, and so does every other node: an event's index is its
// entry's, the same everywhere.
//
// Apply never waits for a reader: readers take the read lock only to copy
// a small batch.
type History struct {
	cfg Config

	mu sync.RWMutex
	// ring holds every event with an index above floor, in index order.
	ring  ring
	floor uint64
	last  uint64 // last applied index seen
	// more is closed when events are added (or the history starts over),
	// and replaced: watchers that read everything wait on it.
	more chan struct{}
	// newest is the index of the newest kept event of each lock; parked
	// are the blocking reads waiting for an event of each lock.
	newest map[string]uint64
	parked map[string]map[*parkedRead]struct{}
}

// New returns an empty history; hand it to fsm.FSM.Observe before
// the FSM applies anything.
func New(cfg Config) *History {
	if cfg.History <= 0 {
		cfg.History = DefaultHistory
	}
	if cfg.Lag <= 0 {
		cfg.Lag = DefaultLag
	}
	return &History{cfg: cfg, more: make(chan struct{}), newest: map[string]uint64{}, parked: map[string]map[*parkedRead]struct{}{}}
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
		h.push(events)
	}
	h.trim()
}

// Restored implements event.Observer. A snapshot that does not follow the
// last applied entry leaves a gap no event describes: the history starts
// over after it, watchers are cut off (they will resume, be told the
// history is compacted, and re-list) and blocking reads wake (spuriously,
// as the state may have changed).
func (h *History) Restored(index uint64, boot bool, events []event.Event) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if boot || index != h.last+1 {
		h.ring.reset()
		h.floor = index
		if len(events) > 0 {
			h.floor = index - 1
		}
		h.newest = map[string]uint64{}
		for lock, reads := range h.parked {
			for p := range reads {
				close(p.c)
			}
			delete(h.parked, lock)
		}
		h.wake()
	}
	h.last = max(h.last, index)
	if len(events) > 0 {
		h.push(events)
	}
}

// push adds one entry's events, under h.mu: it records each lock's newest
// event, wakes the blocking reads of those locks and the watchers.
func (h *History) push(events []event.Event) {
	h.ring.push(events)
	for i := range events {
		e := &events[i]
		if e.Lock == "" {
			continue
		}
		h.newest[e.Lock] = e.Index
		for p := range h.parked[e.Lock] {
			if p.index < e.Index {
				close(p.c)
				delete(h.parked[e.Lock], p)
			}
		}
		if len(h.parked[e.Lock]) == 0 {
			delete(h.parked, e.Lock)
		}
	}
	h.wake()
}

// wake tells every waiting watcher there is more; under h.mu.
func (h *History) wake() {
	close(h.more)
	h.more = make(chan struct{})
}

// trim forgets the events of entries more than History behind the last.
func (h *History) trim() {
	keep := uint64(h.cfg.History)
	if h.last <= keep || h.last-keep <= h.floor {
		return
	}
	h.floor = h.last - keep
	h.ring.dropThrough(h.floor, func(e *event.Event) {
		if e.Lock != "" && h.newest[e.Lock] == e.Index {
			delete(h.newest, e.Lock)
		}
	})
}

// Index returns the last applied index the history has seen.
func (h *History) Index() uint64 {
	h.mu.RLock()
	defer h.mu.RUnlock()
	return h.last
}

// Oldest returns the lowest since that Watch still accepts.
func (h *History) Oldest() uint64 {
	h.mu.RLock()
	defer h.mu.RUnlock()
	return h.floor
}

// Watch returns a watcher of every event with an index above since, in
// order; since < 0 starts at the last applied index. It fails with a
// *CompactedError when events after since are no longer kept.
func (h *History) Watch(since int64) (*Watcher, error) {
	h.mu.RLock()
	defer h.mu.RUnlock()
	from := h.last
	if since >= 0 {
		from = uint64(since)
		if from < h.floor {
			return nil, &CompactedError{Oldest: h.floor, Index: h.last}
		}
	}
	return &Watcher{h: h, next: from, start: h.last}, nil
}

// Watcher follows a node's events from an index: Next returns them a batch
// at a time. It holds nothing but its place, so it needs no closing.
type Watcher struct {
	h *History
	// next is the index of the last entry read: every event up to it was
	// returned by Next (or there was none).
	next uint64
	// start is the node's applied index when the watch began: the events
	// up to it were there to read at once, and count for no lag.
	start uint64
}

// Next appends to buf[:0] the events after the last ones it returned, whole
// entries of them up to cap(buf) events (buf needs a capacity of at least
// one), in order. With nothing new it returns no events and a channel
// closed once there may be more. It fails with ErrLagged when the watcher
// fell more than Config.Lag events behind or the events after it are no
// longer kept: Resume then says where to resume from.
func (w *Watcher) Next(buf []event.Event) ([]event.Event, <-chan struct{}, error) {
	h := w.h
	h.mu.RLock()
	defer h.mu.RUnlock()
	if w.next < h.floor {
		return nil, nil, ErrLagged
	}
	i := h.ring.search(w.next)
	if i == h.ring.len() {
		// Read up: whatever entries came after had no events. (A since
		// above the applied index stays where it was.)
		w.next = max(w.next, h.last)
		return buf[:0], h.more, nil
	}
	counted := i
	if w.start > w.next {
		counted = h.ring.search(w.start)
	}
	if h.ring.len()-counted > h.cfg.Lag {
		return nil, nil, ErrLagged
	}
	out := h.ring.batch(i, buf[:0])
	w.next = out[len(out)-1].Index
	return out, nil, nil
}

// Resume is the index to watch from after ErrLagged: every event up to it
// was returned.
func (w *Watcher) Resume() uint64 { return w.next }

// parkedRead is a blocking read waiting for an event of its lock after
// index; c is closed when one is applied.
type parkedRead struct {
	index uint64
	c     chan struct{}
}

// WaitLock returns once an event of lock is applied after index, when wait
// ends, ctx ends (its error) or stop or until is closed, or at once when the
// lock already changed after index or the events after index are no longer
// kept (one may have been missed: a spurious wake-up, as Consul's blocking
// queries allow). It says whether it saw such an event, or may have; until
// closing counts as may have (the caller rechecks why it waited).
//
// It finds the lock's newest event by its name, not by reading the events
// after index, and parks on the lock alone: entries of other locks never
// wake it.
func (h *History) WaitLock(ctx context.Context, lock string, index uint64, wait time.Duration, stop, until <-chan struct{}) (bool, error) {
	h.mu.Lock()
	if index < h.floor || h.newest[lock] > index {
		h.mu.Unlock()
		return true, nil
	}
	p := &parkedRead{index: index, c: make(chan struct{})}
	if h.parked[lock] == nil {
		h.parked[lock] = map[*parkedRead]struct{}{}
	}
	h.parked[lock][p] = struct{}{}
	h.mu.Unlock()

	timer := time.NewTimer(wait)
	defer timer.Stop()
	changed, err := false, error(nil)
	select {
	case <-p.c:
		return true, nil
	case <-until:
		changed = true
	case <-timer.C:
	case <-ctx.Done():
		err = ctx.Err()
	case <-stop:
	}
	h.mu.Lock()
	if reads := h.parked[lock]; reads != nil {
		delete(reads, p)
		if len(reads) == 0 {
			delete(h.parked, lock)
		}
	}
	h.mu.Unlock()
	return changed, err
}
