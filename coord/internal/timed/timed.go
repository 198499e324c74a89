// Package timed names what the leader's lease timers time (a lock's lease,
// a permit's, a lock's lock-delay, a permit slot's lock-delay) by one typed
// key each (lease.Key: a kind, a name, an id), and lists every one of them
// the state holds, for a new leader to restart at full length. A key is
// compared, never parsed: the timers hand it back to coord as it was made.
package timed

import (
	"iter"
	"time"

	"github.com/fencer-io/fencer/coord/lease"
	"github.com/fencer-io/fencer/fsm"
	"github.com/fencer-io/fencer/fsm/entry"
)

// The kinds of keys. New kinds are appended.
const (
	LockLease   lease.Kind = iota // ID 0: a lock has one lease at a time; token: the grant's
	PermitLease                   // ID: the permit's token, as its token
	LockDelay                     // ID 0; token: the index the delay started at
	SlotDelay                     // ID and token: the index the delay started at
	Session                       // ID and token: the session's id
	MultiLease                    // ID and token: the multi-grant's token
	SharedLease                   // ID: the shared grant's token, as its token
	LockWait                      // a lock's durable waiter: ID and token its Enqueue's index
	PermitWait                    // a semaphore's durable waiter, as LockWait
)

// LockWaitKey is the key of the wait of lock's durable waiter enqueued at
// index: it leaves the queue when the wait runs out unasked.
func LockWaitKey(lock string, index uint64) lease.Key {
	return lease.Key{Kind: LockWait, Name: lock, ID: index}
}

// PermitWaitKey is LockWaitKey for a semaphore's durable waiter.
func PermitWaitKey(sem string, index uint64) lease.Key {
	return lease.Key{Kind: PermitWait, Name: sem, ID: index}
}

// SessionKey is the key of session id's lease, which times every grant
// under it.
func SessionKey(id uint64) lease.Key { return lease.Key{Kind: Session, ID: id} }

// MultiKey is the key of a multi-grant's one lease, whatever its names.
func MultiKey(token uint64) lease.Key { return lease.Key{Kind: MultiLease, ID: token} }

// LockKey is the key of lock's lease.
func LockKey(lock string) lease.Key { return lease.Key{Kind: LockLease, Name: lock} }

// SharedKey is the key of shared grant token of lock: a lock has one
// exclusive lease at a time, but many shared ones.
func SharedKey(lock string, token uint64) lease.Key {
	return lease.Key{Kind: SharedLease, Name: lock, ID: token}
}

// PermitKey is the key of permit token of semaphore sem.
func PermitKey(sem string, token uint64) lease.Key {
	return lease.Key{Kind: PermitLease, Name: sem, ID: token}
}

// DelayKey is the key of a lock's lock-delay.
func DelayKey(lock string) lease.Key { return lease.Key{Kind: LockDelay, Name: lock} }

// SlotDelayKey is the key of the lock-delay of a slot of semaphore sem
// that started at index since.
func SlotDelayKey(sem string, since uint64) lease.Key {
	return lease.Key{Kind: SlotDelay, Name: sem, ID: since}
}

// All yields everything a leader times, for lease.Timers.Promote: each held
// lock under LockKey (a shared grant under SharedKey), each running lock-delay under DelayKey (a semaphore
// slot's under SlotDelayKey) with its start index for a token, and each
// held permit under PermitKey, and each durable waiter's wait under
// LockWaitKey or PermitWaitKey, each at its full length. It counts the
// grants (locks and permits) in held. Running lock-delays restart at full
// length too, for the same reason as leases: a delay may last longer across
// a failover, never shorter.
func All(f *fsm.FSM, held *int) iter.Seq[lease.Lease] {
	return func(yield func(lease.Lease) bool) {
		more := true
		// A multi-grant's names have one lease, its own key's, not one each.
		multis := f.MultiGrants()
		multi := make(map[uint64]bool, len(multis))
		for _, m := range multis {
			multi[m.Token] = true
		}
		f.EachLockUnordered(func(lk entry.Lock) { // the timers' heap orders them
			if more && lk.Session == 0 && !multi[lk.Token] {
				*held++
				more = yield(lease.Lease{Key: LockKey(lk.Name), Token: lk.Token, TTL: millis(lk.TTLMillis)})
			}
		})
		f.EachSharedLock(func(lk entry.Lock) {
			if more && lk.Session == 0 && !multi[lk.Token] {
				*held++
				more = yield(lease.Lease{Key: SharedKey(lk.Name, lk.Token), Token: lk.Token, TTL: millis(lk.TTLMillis)})
			}
		})
		for _, d := range f.Delays() {
			if !more {
				return
			}
			key := DelayKey(d.Lock)
			if d.Semaphore != "" {
				key = SlotDelayKey(d.Semaphore, d.Since)
			}
			more = yield(lease.Lease{Key: key, Token: d.Since, TTL: millis(d.Millis)})
		}
		for _, sem := range f.Semaphores() {
			for _, p := range sem.Permits {
				if !more {
					return
				}
				if p.Session != 0 {
					continue // its session times it
				}
				*held++
				more = yield(lease.Lease{Key: PermitKey(p.Semaphore, p.Token), Token: p.Token, TTL: millis(p.TTLMillis)})
			}
		}
		for _, m := range multis {
			if !more {
				return
			}
			*held++
			more = yield(lease.Lease{Key: MultiKey(m.Token), Token: m.Token, TTL: millis(m.TTLMillis)})
		}
		for _, w := range f.DurableWaiters() {
			if !more {
				return
			}
			key := LockWaitKey(w.Name(), w.Index)
			if w.Permit != nil {
				key = PermitWaitKey(w.Name(), w.Index)
			}
			more = yield(lease.Lease{Key: key, Token: w.Index, TTL: millis(w.WaitMillis)})
		}
		for _, ss := range f.SessionRecords() {
			if !more {
				return
			}
			*held++
			more = yield(lease.Lease{Key: SessionKey(ss.ID), Token: ss.ID, TTL: millis(ss.TTLMillis)})
		}
	}
}

func millis(ms int64) time.Duration { return time.Duration(ms) * time.Millisecond }
