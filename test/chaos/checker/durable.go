package checker

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/fencer-io/fencer/test/chaos/history"
)

// Durable waiters (issue 28) are granted in the order they were enqueued,
// whichever leader serves them: each name's FIFO of durable waiters is in
// the log, and a new leader queues them again in log order before anybody
// else. So, of a lock's grants that answered a durable rw_acquire with
// the index of its Enqueue (wait_index), ordered by token, the wait
// indexes increase: a waiter enqueued later was never granted before one
// enqueued earlier that was granted too. A grant is also made after its
// waiter was enqueued: its wait index is below its token's index. Only
// grants a client was told of are judged (an answer lost, or a grant
// collected by nobody, says nothing), so the check can miss a reordering
// but never invents one.

// DurableOrder finds durable waiters of a lock granted out of their
// enqueue order, and grants that claim an Enqueue after themselves.
func DurableOrder(h history.History) []Violation {
	byLock := map[string][]history.Op{}
	for _, op := range h.Ops {
		if op.Kind == history.RWAcquire && op.Outcome == history.OK && op.WaitIndex != 0 {
			byLock[op.Target] = append(byLock[op.Target], op)
		}
	}
	var out []Violation
	for _, lock := range sortedKeys(byLock) {
		grants := byLock[lock]
		slices.SortFunc(grants, func(a, b history.Op) int { return cmp.Compare(a.Token, b.Token) })
		for i, g := range grants {
			if g.WaitIndex >= g.Token&indexMask {
				out = append(out, Violation{
					Message: fmt.Sprintf("lock %s: grant t%d says it was enqueued at %d, not before it", lock, g.Token, g.WaitIndex),
					Ops:     []history.Op{g},
				})
			}
			if i > 0 && grants[i-1].WaitIndex >= g.WaitIndex {
				prev := grants[i-1]
				out = append(out, Violation{
					Message: fmt.Sprintf("lock %s: durable waiter enqueued at %d granted t%d, before the one enqueued at %d (t%d)",
						lock, prev.WaitIndex, prev.Token, g.WaitIndex, g.Token),
					Ops: []history.Op{prev, g},
				})
			}
		}
	}
	return out
}

// indexMask keeps a token's log index, below its epoch (fsm's EpochShift:
// 40 bits), which a wait index is comparable with.
const indexMask = 1<<40 - 1

// hasDurable reports whether a durable waiter's grant was recorded: what
// DurableOrder judges.
func hasDurable(h history.History) bool {
	for _, op := range h.Ops {
		if op.Kind == history.RWAcquire && op.Outcome == history.OK && op.WaitIndex != 0 {
			return true
		}
	}
	return false
}
