package checker

import (
	"fmt"
	"hash/fnv"

	"github.com/anishathalye/porcupine"
)

// lockState is one lock as the model sees it. States are compared with ==,
// so a free lock always has a zero Token and an empty Holder.
type lockState struct {
	Held bool
	// Anon means the lock is held by the grant of an acquire whose outcome
	// was indeterminate: its token was never seen, only known to exceed Max.
	// The first observation of a token above Max names it.
	Anon   bool
	Token  uint64 // current token; 0 when free or Anon
	Holder string // holder of the current grant, when known
	Max    uint64 // greatest token known to have been granted for this lock
}

func (s lockState) String() string {
	switch {
	case !s.Held:
		return fmt.Sprintf("free (max t%d)", s.Max)
	case s.Anon:
		return fmt.Sprintf("held by %s with an unseen token > t%d", orDash(s.Holder), s.Max)
	}
	return fmt.Sprintf("held by %s t%d (max t%d)", orDash(s.Holder), s.Token, s.Max)
}

func freeLock(max uint64) lockState { return lockState{Max: max} }

// observe returns the states in which the service could truthfully report
// that token t (and holder, if non-empty) is the current grant: the lock is
// held under t, or held by an unseen grant whose token turns out to be t.
func (s lockState) observe(t uint64, holder string) []lockState {
	if !s.Held || (holder != "" && s.Holder != "" && holder != s.Holder) {
		return nil
	}
	if !s.Anon {
		if s.Token == t {
			return []lockState{s}
		}
		return nil
	}
	if t > s.Max {
		return []lockState{{Held: true, Token: t, Holder: s.Holder, Max: t}}
	}
	return nil
}

// lost is the step for a lease_lost answer about token t: the grant is no
// longer current. If it was current a moment ago, it has just expired.
func (s lockState) lost(t uint64) []lockState {
	switch {
	case s.Held && !s.Anon && s.Token == t:
		return []lockState{freeLock(s.Max)}
	case s.Anon && t > s.Max:
		// t may be the unseen grant, now expired, or another grant
		// altogether, in which case the unseen one is still held.
		return []lockState{s, freeLock(t)}
	}
	return []lockState{s}
}

// stepLock is the sequential specification of one lock. Expiry is
// spontaneous, so any step that observes a free lock is allowed from any
// state; what the model forbids is observing a grant that cannot be current.
func stepLock(s lockState, op Op) []lockState {
	switch op.Kind {
	case Acquire:
		switch op.Outcome {
		case OK:
			if op.Token <= s.Max {
				return nil
			}
			return []lockState{{Held: true, Token: op.Token, Holder: op.Holder, Max: op.Token}}
		case LockHeld:
			return s.observe(op.Token, op.HeldBy)
		default:
			return []lockState{s, {Held: true, Anon: true, Holder: op.Holder, Max: s.Max}}
		}
	case Renew:
		switch op.Outcome {
		case OK:
			return s.observe(op.Token, "")
		case LeaseLost:
			return s.lost(op.Token)
		default:
			return []lockState{s}
		}
	case Release:
		switch op.Outcome {
		case OK:
			return releaseAll(s.observe(op.Token, ""))
		case LeaseLost:
			return s.lost(op.Token)
		default:
			return append([]lockState{s}, releaseAll(s.observe(op.Token, ""))...)
		}
	case Read:
		switch {
		case op.Outcome != OK:
			return []lockState{s}
		case op.Held:
			return s.observe(op.Token, "")
		default:
			return []lockState{freeLock(s.Max)}
		}
	}
	panic(fmt.Sprintf("checker: %s op in the lock model", op.Kind))
}

func releaseAll(held []lockState) []lockState {
	out := make([]lockState, len(held))
	for i, s := range held {
		out[i] = freeLock(s.Max)
	}
	return out
}

func hashLock(v any) uint64 {
	s := v.(lockState)
	h := fnv.New64a()
	fmt.Fprintf(h, "%t|%t|%d|%s|%d", s.Held, s.Anon, s.Token, s.Holder, s.Max)
	return h.Sum64()
}

// lockModel is the porcupine model of every lock, partitioned by lock name.
var lockModel = (&porcupine.NondeterministicModel{
	Partition: partitionByTarget,
	Init:      func() []any { return []any{lockState{}} },
	Step: func(state, input, _ any) []any {
		return toAny(stepLock(state.(lockState), input.(Op)))
	},
	Hash:                      hashLock,
	DescribeOperation:         describeOp,
	DescribeState:             func(s any) string { return s.(lockState).String() },
	DescribeOperationMetadata: describeMetadata,
}).ToModel()
