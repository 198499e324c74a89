package coord

import (
	"cmp"
	"slices"

	"github.com/fencer-io/fencer/coord/internal/waitq"
	"github.com/fencer-io/fencer/fsm"
	"github.com/fencer-io/fencer/fsm/entry"
)

// An entry that frees a name hands it to the name's head waiter in that
// same entry (DESIGN.md, "One proposal at a time per name"). The engine
// does it in steps, under the name's queue mutex: Pop the head waiter,
// whose acquire rides in the entry; propose; then Done (or Ended, for a
// lock-delay's end) with the entry's result for the name, or Failed when
// the entry was not written; Release serves the remaining waiters if it
// was, and unlocks. A release, an expiry and a delay's end each hold one
// name. An entry that frees several names at once (a session's end) holds
// each of them through holdNames, in one fixed order, and runs the same
// steps on each: Pop on every name, one proposal, then Done per freed
// grant or Failed on every name, then Release.

// Freeing is one name held by a proposal that frees grants of it, whatever
// the name's kind.
type Freeing interface {
	// Frees says the entry ends the grant with token of this name: the
	// head waiter is offered only if the name has room for it once the
	// entry's grants of it end (a lock's shared grants may leave others
	// held). Called for each before Next.
	Frees(token uint64)
	// Next pops the head waiter, when offer is set and the name will have
	// room for it, and returns its acquire for the entry (nil when nobody
	// waits, there is no room or offer is unset). Called once per grant
	// the entry frees of this name.
	Next(offer bool) entry.Command
	// Done completes the freeing of the grant with token, res being what
	// the entry's result says of it (a *fsm.ReleaseResult or a
	// *fsm.SemReleaseResult): its lease is no longer timed, a lock-delay
	// it started is, and the waiter its Next popped gets what the entry
	// handed it. Called once per Next, in order.
	Done(res any, token uint64)
	// Failed puts every popped waiter back at the head, in its order:
	// the entry was not written.
	Failed()
	// Unfreed is Failed for an entry that was written but freed nothing
	// of the name: the waiters are served on Release.
	Unfreed()
	// Release serves the waiters left, if the entry was written, and
	// unlocks the name's queue.
	Release()
}

// GrantName is a name of one kind.
type GrantName struct {
	Kind fsm.Kind
	Name string
}

// holdNames holds the queues of names (duplicates held once) in one fixed
// order, by kind then name, so that two entries freeing overlapping sets
// cannot each wait for a queue the other holds; a release, an expiry or a
// delay's end holds only one and waits for nothing while it does. The
// holds come back in that order, with the names they hold.
func (s *Service) holdNames(names []GrantName) ([]GrantName, []Freeing) {
	names = slices.Clone(names)
	slices.SortFunc(names, func(a, b GrantName) int {
		return cmp.Or(cmp.Compare(a.Kind, b.Kind), cmp.Compare(a.Name, b.Name))
	})
	names = slices.Compact(names)
	holds := make([]Freeing, len(names))
	set := &holdSet{held: len(names)}
	for i, n := range names {
		for _, e := range s.kinds {
			if e.kind() == n.Kind {
				holds[i] = e.holdName(n.Name, set)
			}
		}
	}
	return names, holds
}

// hold takes name's queue and its mutex, until Release.
func (e *engine[C, R]) hold(name string) *heldName[C, R] {
	q := e.queues.Get(name)
	q.Lock()
	return &heldName[C, R]{e: e, name: name, q: q, set: &holdSet{held: 1}}
}

// heldName is one name whose queue's mutex is held by a proposal that
// frees it.
type heldName[C entry.Command, R any] struct {
	e    *engine[C, R]
	name string
	q    *waitq.Queue[C, R]
	// popped are the waiters Pop took, nil for a Pop that took none; done
	// counts those answered.
	popped  []*waitq.Waiter[C, R]
	done    int
	applied bool
	// frees are the tokens of the name's grants the entry ends (Frees);
	// ending is the start of the lock-delay it ends (0: none).
	frees  []uint64
	ending uint64
	// set is the proposal's holds this one is of.
	set *holdSet
}

// Frees records that the entry ends the grant with token.
func (h *heldName[C, R]) Frees(token uint64) { h.frees = append(h.frees, token) }

// room reports whether the name has room for the head waiter's cmd once
// the entry has ended the grants it frees and the lock-delay it ends.
func (h *heldName[C, R]) room(cmd C) bool {
	st := h.e.state(h.name, "", "", "")
	st.Holders = slices.DeleteFunc(st.Holders, func(g fsm.Held) bool { return slices.Contains(h.frees, g.Token) })
	st.Delays = slices.DeleteFunc(st.Delays, func(d entry.Delay) bool { return h.ending != 0 && d.Since == h.ending })
	taken, delayed := h.e.p.closed(st, cmd)
	return !taken && !delayed
}

// overLimit reports whether the head waiter's holder would hold more than
// the limits allow (--max-locks, --max-locks-per-holder) once the entry
// has ended the grants it frees of this name; an entry freeing several
// names counts only this one's, so it may say so of a holder that the
// exact count admits. Such a waiter is not handed the name: Release's
// serving checks it again (grantWaiter), grants it by an entry of its own
// or refuses it, and serves those behind it.
func (h *heldName[C, R]) overLimit(cmd C) bool {
	holder := h.e.p.holder(cmd)
	st := h.e.state(h.name, holder, "", "")
	for _, g := range st.Holders {
		if slices.Contains(h.frees, g.Token) {
			st.Total--
			if g.Holder == holder {
				st.Mine--
			}
		}
	}
	return h.e.s.checkGrants(st, holder, false) != nil
}

// Pop takes the head waiter when offer is set and the name will have room
// for it, and returns its acquire, stamped with the leader's time, for the
// freeing entry; the zero C when nobody waits, there is no room (a shared
// grant released while others are held, with an exclusive waiter at the
// head: it waits on, rather than being answered with the entry's refusal)
// or offer is unset.
func (h *heldName[C, R]) Pop(offer bool) C {
	var w *waitq.Waiter[C, R]
	var next C
	// A multi-acquire's waiter (Reserved) is granted only under all its
	// names' queues, never in an entry freeing one of them.
	if head := h.q.Head(); offer && head != nil && head.Group == nil && h.room(head.Cmd) && !h.overLimit(head.Cmd) {
		w = h.q.Pop()
		next = w.Cmd
	}
	h.popped = append(h.popped, w)
	h.e.p.stamp(next, h.e.s.nowMillis())
	return next
}

// Next is Pop for a caller that does not know C.
func (h *heldName[C, R]) Next(offer bool) entry.Command {
	next := h.Pop(offer)
	if h.popped[len(h.popped)-1] == nil {
		return nil // not a typed nil in an interface
	}
	return next
}

// Failed puts the popped waiters back at the head, last first, so that
// they keep their order: the entry was not written.
func (h *heldName[C, R]) Failed() {
	for i := len(h.popped) - 1; i >= h.done; i-- {
		if w := h.popped[i]; w != nil {
			h.q.PutBack(w)
		}
	}
	h.popped = h.popped[:h.done]
}

// Done completes the freeing of the grant with token by an entry that was
// applied, res being its result for this name.
func (h *heldName[C, R]) Done(res any, token uint64) {
	t := h.e.s.timers
	// Either key: a lock's shared and exclusive grants are timed under
	// keys of their own, and Forget drops only a lease with this token.
	t.Forget(h.e.p.grantKey(h.name, token, false), token)
	t.Forget(h.e.p.grantKey(h.name, token, true), token)
	f := h.e.p.freed(res)
	if f.delay != nil {
		t.Track(h.e.p.delayKey(h.name, f.delay.Since), f.delay.Since, millis(f.delay.Millis))
	}
	h.answer(f)
}

// Unfreed completes an entry that was applied but freed nothing of this
// name (a session's grant there ended before it): a waiter popped for it
// was handed nothing and goes back to the head, and the name's waiters are
// served on Release, as the entry may have left room.
func (h *heldName[C, R]) Unfreed() {
	h.Failed()
	h.applied = true
}

// Ended completes the end of a lock-delay by an entry that was applied.
func (h *heldName[C, R]) Ended(res any) { h.answer(h.e.p.freed(res)) }

// answer delivers to the next popped waiter, if it took one, what the
// entry handed it.
func (h *heldName[C, R]) answer(f freedName[R]) {
	h.applied = true
	if h.done < len(h.popped) {
		if w := h.popped[h.done]; w != nil {
			h.e.deliver(w, f.next, f.nextErr)
		}
		h.done++
	}
}

// Release serves the waiters left once the entry was applied, and unlocks
// the name's queue.
func (h *heldName[C, R]) Release() {
	if h.applied {
		h.e.serve(h.q, h.name)
	}
	h.q.Unlock()
	h.e.queues.Put(h.name, h.q)
	if h.set.held--; h.set.held == 0 {
		h.e.s.ready.try(h.e.s)
	}
}
