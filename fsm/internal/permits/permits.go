// Package permits is the state's table of semaphores: each one's limit,
// held permits and permit slots in their lock-delay, and the count of
// permits held in all.
package permits

import (
	"sort"

	"github.com/fencer-io/fencer/fsm/entry"
)

// Semaphore is a semaphore with at least one permit held or one slot in
// its lock-delay; an empty one is not kept. Permits are immutable once
// stored.
type Semaphore struct {
	limit   int
	permits map[uint64]*entry.Permit
	// delays are the slots whose permit expired with a lock-delay, by the
	// index of the expiry: each counts against the limit until an EndDelay
	// ends it, as a lock's delay keeps the lock.
	delays map[uint64]entry.Delay
}

func newSemaphore(limit int) *Semaphore {
	return &Semaphore{limit: limit, permits: map[uint64]*entry.Permit{}, delays: map[uint64]entry.Delay{}}
}

// Limit returns the semaphore's limit, set by the acquire that found it
// empty.
func (sem *Semaphore) Limit() int { return sem.limit }

// Held counts the permits held.
func (sem *Semaphore) Held() int { return len(sem.permits) }

// Delayed counts the slots in their lock-delay.
func (sem *Semaphore) Delayed() int { return len(sem.delays) }

// DelayedSince reports whether a slot's delay is known by since.
func (sem *Semaphore) DelayedSince(since uint64) bool {
	_, ok := sem.delays[since]
	return ok
}

// InUse counts the slots taken: permits held and slots in their delay.
func (sem *Semaphore) InUse() int { return len(sem.permits) + len(sem.delays) }

// Permit returns the held permit with token, or nil.
func (sem *Semaphore) Permit(token uint64) *entry.Permit { return sem.permits[token] }

// Permits returns the held permits, sorted by token.
func (sem *Semaphore) Permits() []entry.Permit {
	var out []entry.Permit
	for _, p := range sem.permits {
		out = append(out, *p)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Token < out[j].Token })
	return out
}

// Delays returns the slots in their lock-delay, sorted by start.
func (sem *Semaphore) Delays() []entry.Delay {
	var out []entry.Delay
	for _, d := range sem.delays {
		out = append(out, d)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Since < out[j].Since })
	return out
}

// Table is every semaphore with a permit held or a slot delayed, by name.
type Table struct {
	sems map[string]*Semaphore
	// held counts the permits held in all, byHolder by holder name;
	// derived, not snapshotted.
	held     int
	byHolder map[string]int
}

// New returns an empty table.
func New() *Table { return &Table{sems: map[string]*Semaphore{}, byHolder: map[string]int{}} }

// HeldBy counts the permits holder holds, in every semaphore.
func (t *Table) HeldBy(holder string) int { return t.byHolder[holder] }

// Get returns a semaphore, or nil when none of its permits is held and
// none of its slots delayed.
func (t *Table) Get(name string) *Semaphore { return t.sems[name] }

// Held counts the permits held in all semaphores.
func (t *Table) Held() int { return t.held }

// Len counts the semaphores.
func (t *Table) Len() int { return len(t.sems) }

// Add stores a granted permit; the first of an empty semaphore sets its
// limit.
func (t *Table) Add(p *entry.Permit) {
	t.semaphore(p.Semaphore, p.Limit).permits[p.Token] = p
	t.held++
	t.byHolder[p.Holder]++
}

// Remove frees a held permit's slot.
func (t *Table) Remove(p *entry.Permit) {
	sem := t.sems[p.Semaphore]
	delete(sem.permits, p.Token)
	t.held--
	if t.byHolder[p.Holder]--; t.byHolder[p.Holder] <= 0 {
		delete(t.byHolder, p.Holder)
	}
	t.dropIfEmpty(p.Semaphore, sem)
}

// AddSlotDelay records a slot's lock-delay (an expiry, or a restore).
func (t *Table) AddSlotDelay(d entry.Delay) {
	t.semaphore(d.Semaphore, d.Limit).delays[d.Since] = d
}

// EndSlotDelay ends the delay of the slot of semaphore name since index
// since, if there is one.
func (t *Table) EndSlotDelay(name string, since uint64) (entry.Delay, bool) {
	sem := t.sems[name]
	if sem == nil {
		return entry.Delay{}, false
	}
	d, ok := sem.delays[since]
	if ok {
		delete(sem.delays, since)
		t.dropIfEmpty(name, sem)
	}
	return d, ok
}

func (t *Table) semaphore(name string, limit int) *Semaphore {
	sem := t.sems[name]
	if sem == nil {
		sem = newSemaphore(limit)
		t.sems[name] = sem
	}
	return sem
}

func (t *Table) dropIfEmpty(name string, sem *Semaphore) {
	if sem.InUse() == 0 {
		delete(t.sems, name)
	}
}

// Names returns the semaphores' names, sorted.
func (t *Table) Names() []string {
	names := make([]string, 0, len(t.sems))
	for name := range t.sems {
		names = append(names, name)
	}
	sort.Strings(names)
	return names
}

// Permits returns every held permit, sorted by semaphore and token.
func (t *Table) Permits() []entry.Permit {
	var out []entry.Permit
	for _, name := range t.Names() {
		out = append(out, t.sems[name].Permits()...)
	}
	return out
}

// SlotDelays returns every slot's lock-delay, sorted by semaphore and
// start.
func (t *Table) SlotDelays() []entry.Delay {
	var out []entry.Delay
	for _, name := range t.Names() {
		out = append(out, t.sems[name].Delays()...)
	}
	return out
}
