package events

import "github.com/fencer-io/fencer/fsm/event"

// minRing is the smallest capacity a ring grows to.
const minRing = 1024

// ring is the history's events in index order: a circular buffer that
// doubles when full and is reused after that, so that an applied entry's
// events are copied into it once. (A slice appended to at its end and cut
// at its head regrew and copied the whole history every few thousand
// entries: 7% of the bytes a loaded node allocated.) It halves when it is
// less than a quarter full, so a burst does not hold its memory for good.
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

// dropThrough forgets the oldest events while their index is at most floor.
func (r *ring) dropThrough(floor uint64) {
	for r.n > 0 && r.buf[r.head].Index <= floor {
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

// since returns a copy of the events with an index above from.
func (r *ring) since(from uint64) []event.Event {
	i := r.n
	for i > 0 && r.at(i-1).Index > from {
		i--
	}
	if i == r.n {
		return nil
	}
	out := make([]event.Event, 0, r.n-i)
	for ; i < r.n; i++ {
		out = append(out, *r.at(i))
	}
	return out
}

// resize moves the events, oldest first, into a buffer of size c ≥ n.
func (r *ring) resize(c int) {
	buf := make([]event.Event, c)
	for i := range r.n {
		buf[i] = *r.at(i)
	}
	r.buf, r.head = buf, 0
}
