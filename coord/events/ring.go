package events

import (
	"sort"

	"github.com/fencer-io/fencer/fsm/event"
)

// minRing is the smallest capacity a ring grows to.
const minRing = 1024

// ring is the history's events in index order: a circular buffer that
// doubles when full and is reused after that, so that an applied entry's
// events are copied into it once. (A slice appended to at its end and cut
// at its head regrew and copied the whole history every few thousand
// entries: 7% of the bytes a loaded node allocated.) It halves when it is
// less than a quarter full, so a burst does not hold its memory for good.
//
// Readers find their place by index (search, a binary search: the events
// are in index order) and copy a batch from there, so that no reader ever
// holds a copy of the history (a copy per watcher made 100 unread streams
// take a gigabyte).
type ring struct {
	buf  []event.Event
	head int // the oldest event's position in buf
	n    int
}

func (r *ring) len() int { return r.n }

// at returns the i-th oldest event (0 ≤ i < len).
func (r *ring) at(i int) *event.Event { return &r.buf[(r.head+i)%len(r.buf)] }

// push appends events after the newest.
func (r *ring) push(events []event.Event) {
	if r.n+len(events) > len(r.buf) {
		r.resize(max(minRing, 2*len(r.buf), r.n+len(events)))
	}
	for _, e := range events {
		r.buf[(r.head+r.n)%len(r.buf)] = e
		r.n++
	}
}

// dropThrough forgets the oldest events while their index is at most
// floor, telling forget of each first.
func (r *ring) dropThrough(floor uint64, forget func(*event.Event)) {
	for r.n > 0 && r.buf[r.head].Index <= floor {
		forget(&r.buf[r.head])
		r.buf[r.head] = event.Event{} // let its strings go
		r.head = (r.head + 1) % len(r.buf)
		r.n--
	}
	if len(r.buf) > minRing && r.n < len(r.buf)/4 {
		r.resize(len(r.buf) / 2)
	}
}

// reset forgets every event and the memory that held them.
func (r *ring) reset() { *r = ring{} }

// search returns the position of the oldest event with an index above
// from (len when there is none).
func (r *ring) search(from uint64) int {
	return sort.Search(r.n, func(i int) bool { return r.at(i).Index > from })
}

// batch appends to buf the events of whole entries from position i on, up
// to cap(buf) events, but always the whole of the first entry (a restore
// voids many grants in one entry, and an entry is never split).
func (r *ring) batch(i int, buf []event.Event) []event.Event {
	for ; i < r.n; i++ {
		e := r.at(i)
		if len(buf) > 0 && len(buf) >= cap(buf) && e.Index != buf[len(buf)-1].Index {
			break
		}
		buf = append(buf, *e)
	}
	return buf
}

// resize moves the events, oldest first, into a buffer of size c ≥ n.
func (r *ring) resize(c int) {
	buf := make([]event.Event, c)
	for i := range r.n {
		buf[i] = *r.at(i)
	}
	r.buf, r.head = buf, 0
}
