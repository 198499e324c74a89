package model

import (
	"cmp"
	"fmt"
	"hash/fnv"

	"github.com/anishathalye/porcupine"

	"github.com/fencer-io/fencer/test/chaos/history"
)

// lockState is one lock as the model sees it. States are compared with ==,
// so a free lock always has a zero Token and an empty Holder.
type lockState struct {
	Held   bool
	Token  uint64 // current token; 0 when free
	Holder string // holder of the current grant, when known
	Max    uint64 // greatest token known to have been granted for this lock
}

func (s lockState) String() string {
	if !s.Held {
		return fmt.Sprintf("free (max t%d)", s.Max)
	}
	return fmt.Sprintf("held by %s t%d (max t%d)", cmp.Or(s.Holder, "-"), s.Token, s.Max)
}

func freeLock(max uint64) lockState { return lockState{Max: max} }

// LockInput is an op as the lock model sees it. Unseen is set when op
// observes a token that no acquire ok granted on its lock but that an
// indeterminate acquire called before op returned may have (see windows).
type LockInput struct {
	Op     history.Op
	Unseen bool
}

// observe returns the states in which the service could truthfully report
// that token t (and holder, if non-empty) is the current grant: the lock is
// held under t, or, for an unseen token above every grant so far, an
// indeterminate acquire granted it just now (after any current lease
// expired unseen).
func (s lockState) observe(in LockInput, holder string) []lockState {
	t := in.Op.Token
	switch {
	case s.Held && s.Token == t && (holder == "" || s.Holder == "" || holder == s.Holder):
		return []lockState{s}
	case in.Unseen && t > s.Max:
		return []lockState{{Held: true, Token: t, Holder: holder, Max: t}}
	}
	return nil
}

// stepLock is the sequential specification of one lock. Expiry is
// spontaneous, so any step that observes a free lock is allowed from any
// state; what the model forbids is observing a grant that cannot be current.
func stepLock(s lockState, in LockInput) []lockState {
	op := in.Op
	switch op.Kind {
	case history.Acquire:
		switch op.Outcome {
		case history.OK:
			if op.Token <= s.Max {
				return nil
			}
			return []lockState{{Held: true, Token: op.Token, Holder: op.Holder, Max: op.Token}}
		case history.LockHeld:
			return s.observe(in, op.HeldBy)
		default:
			// If it happened, its grant is unseen until observed, and
			// observe accounts for it then.
			return []lockState{s}
		}
	case history.Renew:
		switch op.Outcome {
		case history.OK:
			return s.observe(in, "")
		case history.LeaseLost, history.Revoked:
			return []lockState{s.lost(op.Token)}
		default:
			return []lockState{s}
		}
	case history.Release:
		switch op.Outcome {
		case history.OK:
			return releaseAll(s.observe(in, ""))
		case history.LeaseLost, history.Revoked:
			return []lockState{s.lost(op.Token)}
		default:
			// Freeing the lock is what a spontaneous expiry does anyway.
			return []lockState{s}
		}
	case history.Revoke:
		// An operator's revoke ends the grant as an expiry would: ok says
		// the token was current until then; a refusal that it was not.
		// The waiter it hands the lock to is seen by its acquire ok.
		switch op.Outcome {
		case history.OK:
			return releaseAll(s.observe(in, ""))
		case history.LeaseLost, history.Revoked:
			return []lockState{s.lost(op.Token)}
		default:
			return []lockState{s}
		}
	case history.Read:
		switch {
		case op.Outcome != history.OK:
			return []lockState{s}
		case op.Held:
			return s.observe(in, "")
		default:
			return []lockState{freeLock(s.Max)}
		}
	}
	panic(fmt.Sprintf("checker: %s op in the lock model", op.Kind))
}

// lost is the step for a lease_lost answer about token t: the grant is no
// longer current. If it was current a moment ago, it has just expired.
func (s lockState) lost(t uint64) lockState {
	if s.Held && s.Token == t {
		return freeLock(s.Max)
	}
	return s
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
	fmt.Fprintf(h, "%t|%d|%s|%d", s.Held, s.Token, s.Holder, s.Max)
	return h.Sum64()
}

// Lock is the porcupine model of every lock, partitioned by lock name.
var Lock = (&porcupine.NondeterministicModel{
	Partition: PartitionByTarget,
	Init:      func() []any { return []any{lockState{}} },
	Step: func(state, input, _ any) []any {
		return toAny(stepLock(state.(lockState), input.(LockInput)))
	},
	Hash:                      hashLock,
	DescribeOperation:         describeOp,
	DescribeState:             func(s any) string { return s.(lockState).String() },
	DescribeOperationMetadata: describeMetadata,
}).ToModel()
