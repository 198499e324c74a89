package snapshot

import (
	"cmp"
	"fmt"
)

// checkDurable refuses durable waiters and waited grants no log could
// have written: a waiter without one command, a wait or a request id, or
// enqueued at 0 or after the snapshot's index; a name's waiters out of
// log order, or a kind's names out of order; a waited grant of token 0,
// above the last token, enqueued at or after its grant, or out of order.
// (That a waited grant is held is the restorer's to check.)
func (img *Image) checkDurable() error {
	var prevKind, prevName string
	var prevIndex uint64
	for i := range img.DurableWaiters {
		w := &img.DurableWaiters[i]
		if (w.Acquire == nil) == (w.Permit == nil) || w.WaitMillis <= 0 || w.Name() == "" || w.RequestID() == "" || w.Index == 0 ||
			(img.Header.AppliedIndex != 0 && w.Index > img.Header.AppliedIndex) {
			return fmt.Errorf("durable waiter enqueued at %d for %q with wait %d ms and request id %q", w.Index, w.Name(), w.WaitMillis, w.RequestID())
		}
		kind := "lock"
		if w.Permit != nil {
			kind = "semaphore"
		}
		switch c := cmp.Or(cmp.Compare(kind, prevKind), cmp.Compare(w.Name(), prevName)); {
		case i > 0 && c < 0, i > 0 && c == 0 && w.Index <= prevIndex:
			return fmt.Errorf("durable waiter enqueued at %d for %s %q is out of order", w.Index, kind, w.Name())
		}
		prevKind, prevName, prevIndex = kind, w.Name(), w.Index
	}
	var prev uint64
	for _, g := range img.Waited {
		if g.Token == 0 || g.Token > img.Header.LastToken || g.Token <= prev || g.WaitIndex == 0 || g.WaitIndex >= g.Token {
			return fmt.Errorf("waited grant %d enqueued at %d (after %d, last token %d)", g.Token, g.WaitIndex, prev, img.Header.LastToken)
		}
		prev = g.Token
	}
	return nil
}
