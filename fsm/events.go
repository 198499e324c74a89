package fsm

import (
	"github.com/fencer-io/fencer/fsm/entry"
	"github.com/fencer-io/fencer/fsm/event"
)

// Observe makes o see every entry applied from now on. Call it before the
// FSM is handed to Raft.
func (f *FSM) Observe(o event.Observer) {
	f.mu.Lock()
	f.obs = o
	f.mu.Unlock()
}

// eventsOf returns the events of cmd applied at index with result. before
// is what the state looked like where it matters (see memberExisted).
func eventsOf(cmd entry.Command, result any, index uint64, memberExisted bool) []event.Event {
	switch c := cmd.(type) {
	case *entry.Acquire:
		if r, ok := result.(*AcquireResult); ok && !r.Existing {
			return []event.Event{{Index: index, Type: event.Acquired, Lock: r.Grant.Name, Holder: r.Grant.Holder, Token: r.Grant.Token, Value: r.Grant.Value, Session: r.Grant.Session, Mode: r.Grant.Mode}}
		}
	case *entry.EndDelay:
		// The end of a lock-delay is an event only when it grants the lock.
		if r, ok := result.(*EndDelayResult); ok && r.Next != nil {
			return []event.Event{{Index: index, Type: event.Acquired, Lock: r.Next.Name, Holder: r.Next.Holder, Token: r.Next.Token, Value: r.Next.Value, Session: r.Next.Session, Mode: r.Next.Mode}}
		}
		if r, ok := result.(*EndDelayResult); ok && r.NextPermit != nil {
			p := r.NextPermit.Permit
			return []event.Event{{Index: index, Type: event.PermitAcquired, Semaphore: p.Semaphore, Holder: p.Holder, Token: p.Token,
				Limit: p.Limit, Held: r.NextPermit.Held, Session: p.Session}}
		}
	case *entry.SetValue:
		if r, ok := result.(*SetValueResult); ok {
			return []event.Event{{Index: index, Type: event.ValueSet, Lock: r.Grant.Name, Holder: r.Grant.Holder, Token: r.Grant.Token, Value: r.Grant.Value}}
		}
	case *entry.SemAcquire:
		if r, ok := result.(*PermitResult); ok && !r.Existing {
			p := r.Permit
			return []event.Event{{Index: index, Type: event.PermitAcquired, Semaphore: p.Semaphore, Holder: p.Holder, Token: p.Token,
				Limit: p.Limit, Held: r.Held, Session: p.Session}}
		}
	case *entry.SemRelease:
		return freedPermitEvents(result, index, event.PermitReleased, event.Released)
	case *entry.SemExpire:
		return freedPermitEvents(result, index, event.PermitExpired, event.Expired)
	case *entry.Release:
		return freedEvents(result, index, event.Released)
	case *entry.Expire:
		return freedEvents(result, index, event.Expired)
	case *entry.SessionCreate:
		if r, ok := result.(*SessionResult); ok && !r.Existing {
			return []event.Event{{Index: index, Type: event.SessionCreated, Session: r.Session.ID, Holder: r.Session.Holder}}
		}
	case *entry.SessionEnd:
		return sessionEndEvents(result, index)
	case *entry.MultiAcquire:
		return multiAcquiredEvents(result, index)
	case *entry.MultiRelease:
		return multiFreedEvents(result, index)
	case *entry.Revoke:
		return revokeEvents(result, index)
	case *entry.Enqueue:
		if r, ok := result.(*EnqueueResult); ok && !r.Existing {
			return []event.Event{waiterEvent(index, event.Queued, &r.Waiter)}
		}
	case *entry.Dequeue:
		if r, ok := result.(*DequeueResult); ok {
			return []event.Event{waiterEvent(index, event.Dequeued, &r.Waiter)}
		}
	case *entry.Put:
		if r, ok := result.(*PutResult); ok {
			return []event.Event{{Index: index, Type: event.Put, Key: r.Key, Token: r.Token, ValueSize: len(c.Value)}}
		}
	case *entry.DeleteKey:
		if r, ok := result.(*DeleteKeyResult); ok {
			return []event.Event{{Index: index, Type: event.KeyDeleted, Key: r.Key, Token: r.LastToken}}
		}
	case *entry.SetMember:
		if !memberExisted {
			return []event.Event{{Index: index, Type: event.MemberAdded, Member: c.ID}}
		}
	case *entry.RemoveMember:
		if memberExisted {
			return []event.Event{{Index: index, Type: event.MemberRemoved, Member: c.ID}}
		}
	case *entry.BumpEpoch:
		if e, ok := result.(uint64); ok {
			return []event.Event{{Index: index, Type: event.Epoch, Epoch: e}}
		}
	}
	return nil
}

func freedEvents(result any, index uint64, how string) []event.Event {
	r, ok := result.(*ReleaseResult)
	if !ok {
		return nil
	}
	return lockFreedEvents(r, index, how)
}

// lockFreedEvents are a lock's release or expiry (how), or its handoff.
func lockFreedEvents(r *ReleaseResult, index uint64, how string) []event.Event {
	if r.Next != nil {
		return []event.Event{{Index: index, Type: event.HandedOff, Lock: r.Freed.Name,
			Holder: r.Next.Holder, Token: r.Next.Token, Value: r.Next.Value,
			PrevHolder: r.Freed.Holder, PrevToken: r.Freed.Token, Reason: how, Session: r.Next.Session, Mode: r.Next.Mode}}
	}
	return []event.Event{{Index: index, Type: how, Lock: r.Freed.Name, Holder: r.Freed.Holder, Token: r.Freed.Token, Session: r.Freed.Session, Mode: r.Freed.Mode}}
}

// freedPermitEvents are a permit's release or expiry (typ), or its handoff
// with reason how.
func freedPermitEvents(result any, index uint64, typ, how string) []event.Event {
	r, ok := result.(*SemReleaseResult)
	if !ok {
		return nil
	}
	return permitFreedEvents(r, index, typ, how)
}

// permitFreedEvents are a permit's release or expiry (typ), or its
// handoff with reason how.
func permitFreedEvents(r *SemReleaseResult, index uint64, typ, how string) []event.Event {
	f := r.Freed
	if r.Next != nil {
		n := r.Next.Permit
		return []event.Event{{Index: index, Type: event.PermitHandedOff, Semaphore: f.Semaphore, Holder: n.Holder, Token: n.Token,
			PrevHolder: f.Holder, PrevToken: f.Token, Reason: how, Limit: n.Limit, Held: r.Held, Session: n.Session}}
	}
	return []event.Event{{Index: index, Type: typ, Semaphore: f.Semaphore, Holder: f.Holder, Token: f.Token, Limit: f.Limit, Held: r.Held, Session: f.Session}}
}

// sessionEndEvents are each ended grant's event, in the order the entry
// ended them, then the session's own.
func sessionEndEvents(result any, index uint64) []event.Event {
	r, ok := result.(*SessionEndResult)
	if !ok {
		return nil
	}
	how, permitHow, typ := event.Released, event.PermitReleased, event.SessionClosed
	switch {
	case r.Expired:
		how, permitHow, typ = event.Expired, event.PermitExpired, event.SessionExpired
	case r.Revoked:
		how, permitHow, typ = event.Revoked, event.Revoked, event.Revoked
	}
	var out []event.Event
	for _, l := range r.Locks {
		out = append(out, lockFreedEvents(l, index, how)...)
	}
	for _, p := range r.Permits {
		out = append(out, permitFreedEvents(p, index, permitHow, how)...)
	}
	return append(out, event.Event{Index: index, Type: typ, Session: r.Session.ID, Holder: r.Session.Holder})
}

// multiAcquiredEvents are a multi-grant's acquired events, one per name
// in its order, all with its one token.
func multiAcquiredEvents(result any, index uint64) []event.Event {
	r, ok := result.(*MultiResult)
	if !ok || r.Existing {
		return nil
	}
	out := make([]event.Event, 0, len(r.Grant.Names))
	for _, n := range r.Grant.Names {
		out = append(out, event.Event{Index: index, Type: event.Acquired, Lock: n, Holder: r.Grant.Holder, Token: r.Grant.Token, Mode: r.Grant.Mode,
			Session: r.Grant.Session})
	}
	return out
}

// multiFreedEvents are the released (expired, revoked) events of every
// name a multi-grant's end freed, in its order.
func multiFreedEvents(result any, index uint64) []event.Event {
	r, ok := result.(*MultiReleaseResult)
	if !ok {
		return nil
	}
	how := event.Released
	switch {
	case r.Expired:
		how = event.Expired
	case r.Revoked:
		how = event.Revoked
	}
	var out []event.Event
	for _, l := range r.Locks {
		out = append(out, lockFreedEvents(l, index, how)...)
	}
	return out
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
func restoreEvents(s *state, applied uint64) []event.Event {
	if s.restoredAt == 0 || s.restoredAt != applied {
		return nil
	}
	out := make([]event.Event, 0, len(s.voided)+1)
	for _, v := range s.voided {
		out = append(out, event.Event{Index: applied, Type: event.Voided, Lock: v.Lock, Semaphore: v.Semaphore, Holder: v.Holder, Token: v.Token})
	}
	return append(out, event.Event{Index: applied, Type: event.Epoch, Epoch: s.epoch})
}

// revokeEvents are a revoke's: the revoked grant's (or its hand-off), or
// a revoked session's.
func revokeEvents(result any, index uint64) []event.Event {
	r, ok := result.(*RevokeResult)
	switch {
	case !ok:
		return nil
	case r.Lock != nil:
		return lockFreedEvents(r.Lock, index, event.Revoked)
	case r.Permit != nil:
		return permitFreedEvents(r.Permit, index, event.Revoked, event.Revoked)
	}
	return sessionEndEvents(r.Session, index)
}

// waiterEvent is a durable waiter's event of type typ at index.
func waiterEvent(index uint64, typ string, w *entry.Waiter) event.Event {
	ev := event.Event{Index: index, Type: typ, Holder: w.Holder(), WaitIndex: w.Index}
	if w.Acquire != nil {
		ev.Lock, ev.Mode = w.Acquire.Lock, w.Acquire.Mode
	} else {
		ev.Semaphore, ev.Limit = w.Permit.Semaphore, w.Permit.Limit
	}
	return ev
}
