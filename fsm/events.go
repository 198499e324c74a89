package fsm

import "github.com/fencer-io/fencer/fsm/entry"

// Event types. Events are derived from applied entries only, so every replica
// that applies the same log produces the same events; an event's index is
// the log index of the entry that produced it.
//
// They are also the types of GET /v1/events, which api/wire spells again:
// the edge passes Type through as it is, and the two cannot share one
// definition, since fsm knows nothing of HTTP and the contract imports
// nothing of fencer. TestEventTypesAreTheContracts keeps them equal.
const (
	EventAcquired      = "acquired"
	EventReleased      = "released"
	EventExpired       = "expired"
	EventHandedOff     = "handed_off"
	EventVoided        = "voided"
	EventPut           = "put"
	EventKeyDeleted    = "key_deleted"
	EventMemberAdded   = "member_added"
	EventMemberRemoved = "member_removed"
	EventEpoch         = "epoch"
	// EventValueSet: a held lock's published value changed (an election's
	// Proclaim); the token is the grant's, unchanged.
	EventValueSet = "value_set"
	// Semaphore permits: a permit granted, released, expired, or freed and
	// handed to the head waiter in the same entry. They name the semaphore
	// (never a lock) and carry its limit and the permits held once the entry
	// is applied.
	EventPermitAcquired  = "permit_acquired"
	EventPermitReleased  = "permit_released"
	EventPermitExpired   = "permit_expired"
	EventPermitHandedOff = "permit_handed_off"
)

// Event is one change an applied entry made. Fields a type does not use are
// zero.
type Event struct {
	Index uint64
	Type  string
	Lock  string // acquired, released, expired, handed_off, voided
	// Holder and Token are the grant's; for handed_off, the new grant's.
	Holder string
	Token  uint64
	// PrevHolder and PrevToken are the ended grant of a handed_off, and
	// Reason how it ended (released or expired).
	PrevHolder string
	PrevToken  uint64
	Reason     string
	Key        string // put, key_deleted (Token is then the mark it had)
	ValueSize  int    // put: the value's length, never the value
	Member     string // member_added, member_removed
	Epoch      uint64 // epoch
	// Value is the grant's published value on acquired, handed_off and
	// value_set (elections).
	Value string
	// Semaphore, Limit and Held are a permit event's semaphore, its limit
	// and the permits held after the entry.
	Semaphore string
	Limit     int
	Held      int
}

// Observer is told what each applied entry changed, in log order, on every
// replica. It is called under the FSM's lock, so it must be quick and must
// not call back into the FSM; events is empty for entries that changed
// nothing observable (and for Raft's own entries), so that the observer
// knows how far the log has been applied.
type Observer interface {
	// Applied reports the events of the entry at index.
	Applied(index uint64, events []Event)
	// Restored reports that the state was replaced by a snapshot whose
	// applied index is index: at startup (boot true), when a follower
	// catches up from its leader's snapshot, or by a restore, whose voided
	// grants and new epoch are the events.
	Restored(index uint64, boot bool, events []Event)
}

// Observe makes o see every entry applied from now on. Call it before the
// FSM is handed to Raft.
func (f *FSM) Observe(o Observer) {
	f.mu.Lock()
	f.obs = o
	f.mu.Unlock()
}

// eventsOf returns the events of cmd applied at index with result. before
// is what the state looked like where it matters (see memberExisted).
func eventsOf(cmd entry.Command, result any, index uint64, memberExisted bool) []Event {
	switch c := cmd.(type) {
	case *entry.Acquire:
		if r, ok := result.(*AcquireResult); ok && !r.Existing {
			return []Event{{Index: index, Type: EventAcquired, Lock: r.Grant.Name, Holder: r.Grant.Holder, Token: r.Grant.Token, Value: r.Grant.Value}}
		}
	case *entry.EndDelay:
		// The end of a lock-delay is an event only when it grants the lock.
		if r, ok := result.(*EndDelayResult); ok && r.Next != nil {
			return []Event{{Index: index, Type: EventAcquired, Lock: r.Next.Name, Holder: r.Next.Holder, Token: r.Next.Token, Value: r.Next.Value}}
		}
		if r, ok := result.(*EndDelayResult); ok && r.NextPermit != nil {
			p := r.NextPermit.Permit
			return []Event{{Index: index, Type: EventPermitAcquired, Semaphore: p.Semaphore, Holder: p.Holder, Token: p.Token,
				Limit: p.Limit, Held: r.NextPermit.Held}}
		}
	case *entry.SetValue:
		if r, ok := result.(*SetValueResult); ok {
			return []Event{{Index: index, Type: EventValueSet, Lock: r.Grant.Name, Holder: r.Grant.Holder, Token: r.Grant.Token, Value: r.Grant.Value}}
		}
	case *entry.SemAcquire:
		if r, ok := result.(*PermitResult); ok && !r.Existing {
			p := r.Permit
			return []Event{{Index: index, Type: EventPermitAcquired, Semaphore: p.Semaphore, Holder: p.Holder, Token: p.Token,
				Limit: p.Limit, Held: r.Held}}
		}
	case *entry.SemRelease:
		return freedPermitEvents(result, index, EventPermitReleased, EventReleased)
	case *entry.SemExpire:
		return freedPermitEvents(result, index, EventPermitExpired, EventExpired)
	case *entry.Release:
		return freedEvents(result, index, EventReleased)
	case *entry.Expire:
		return freedEvents(result, index, EventExpired)
	case *entry.Put:
		if r, ok := result.(*PutResult); ok {
			return []Event{{Index: index, Type: EventPut, Key: r.Key, Token: r.Token, ValueSize: len(c.Value)}}
		}
	case *entry.DeleteKey:
		if r, ok := result.(*DeleteKeyResult); ok {
			return []Event{{Index: index, Type: EventKeyDeleted, Key: r.Key, Token: r.LastToken}}
		}
	case *entry.SetMember:
		if !memberExisted {
			return []Event{{Index: index, Type: EventMemberAdded, Member: c.ID}}
		}
	case *entry.RemoveMember:
		if memberExisted {
			return []Event{{Index: index, Type: EventMemberRemoved, Member: c.ID}}
		}
	case *entry.BumpEpoch:
		if e, ok := result.(uint64); ok {
			return []Event{{Index: index, Type: EventEpoch, Epoch: e}}
		}
	}
	return nil
}

func freedEvents(result any, index uint64, how string) []Event {
	r, ok := result.(*ReleaseResult)
	if !ok {
		return nil
	}
	if r.Next != nil {
		return []Event{{Index: index, Type: EventHandedOff, Lock: r.Freed.Name,
			Holder: r.Next.Holder, Token: r.Next.Token, Value: r.Next.Value,
			PrevHolder: r.Freed.Holder, PrevToken: r.Freed.Token, Reason: how}}
	}
	return []Event{{Index: index, Type: how, Lock: r.Freed.Name, Holder: r.Freed.Holder, Token: r.Freed.Token}}
}

// freedPermitEvents are a permit's release or expiry (typ), or its handoff
// with reason how.
func freedPermitEvents(result any, index uint64, typ, how string) []Event {
	r, ok := result.(*SemReleaseResult)
	if !ok {
		return nil
	}
	f := r.Freed
	if r.Next != nil {
		n := r.Next.Permit
		return []Event{{Index: index, Type: EventPermitHandedOff, Semaphore: f.Semaphore, Holder: n.Holder, Token: n.Token,
			PrevHolder: f.Holder, PrevToken: f.Token, Reason: how, Limit: n.Limit, Held: r.Held}}
	}
	return []Event{{Index: index, Type: typ, Semaphore: f.Semaphore, Holder: f.Holder, Token: f.Token, Limit: f.Limit, Held: r.Held}}
}

// memberID returns the id a membership command names, if it is one.
func memberID(cmd entry.Command) (string, bool) {
	switch c := cmd.(type) {
	case *entry.SetMember:
		return c.ID, true
	case *entry.RemoveMember:
		return c.ID, true
	}
	return "", false
}

// restoreEvents are the events of installing s, read from a snapshot at
// index applied: those of the restore or recovery that wrote it, when s is
// that state itself (applied is the restore's index), and none otherwise.
// They come from the snapshot alone, never
// from what the member held before, so every member that installs the same
// state reports the same events: one that lagged at the restore too (it
// held less), and one that catches up later from a newer snapshot of its
// leader (which reports nothing, its history starting after it; see
// coord.Events.Restored).
func restoreEvents(s *state, applied uint64) []Event {
	if s.restoredAt == 0 || s.restoredAt != applied {
		return nil
	}
	out := make([]Event, 0, len(s.voided)+1)
	for _, v := range s.voided {
		out = append(out, Event{Index: applied, Type: EventVoided, Lock: v.Lock, Holder: v.Holder, Token: v.Token})
	}
	return append(out, Event{Index: applied, Type: EventEpoch, Epoch: s.epoch})
}
