// Package timed names what the leader's lease timers time (a lock's lease,
// a permit's, a lock's lock-delay, a permit slot's lock-delay) by one key
// each, reads a key back, and lists every one of them the state holds, for
// a new leader to restart at full length.
//
// Lock names never hold a NUL (wire.ValidName), so the other kinds' keys,
// which start with one, cannot clash with a lock's, which is its name.
package timed

import (
	"iter"
	"strconv"
	"strings"
	"time"

	"github.com/fencer-io/fencer/coord/lease"
	"github.com/fencer-io/fencer/fsm"
	"github.com/fencer-io/fencer/fsm/entry"
)

// Kind is what a key times.
type Kind int

// The kinds of keys.
const (
	LockLease   Kind = iota // key: the lock's name; token: the grant's
	PermitLease             // PermitKey; token: the permit's
	LockDelay               // DelayKey; token: the index the delay started at
	SlotDelay               // SlotDelayKey; token: the index the delay started at
)

const (
	permitPrefix    = "\x00sem\x00"
	delayPrefix     = "\x00delay\x00"
	slotDelayPrefix = "\x00semdelay\x00"
)

// PermitKey is the key of permit token of semaphore sem.
func PermitKey(sem string, token uint64) string {
	return permitPrefix + sem + "\x00" + strconv.FormatUint(token, 10)
}

// DelayKey is the key of a lock's lock-delay.
func DelayKey(lock string) string { return delayPrefix + lock }

// SlotDelayKey is the key of the lock-delay of a slot of semaphore sem
// that started at index since.
func SlotDelayKey(sem string, since uint64) string {
	return slotDelayPrefix + sem + "\x00" + strconv.FormatUint(since, 10)
}

// Parse returns what key times and the name of its lock or semaphore.
func Parse(key string) (Kind, string) {
	if lock, ok := strings.CutPrefix(key, delayPrefix); ok {
		return LockDelay, lock
	}
	if rest, ok := strings.CutPrefix(key, slotDelayPrefix); ok {
		return SlotDelay, rest[:strings.LastIndexByte(rest, 0)]
	}
	if rest, ok := strings.CutPrefix(key, permitPrefix); ok {
		return PermitLease, rest[:strings.LastIndexByte(rest, 0)]
	}
	return LockLease, key
}

// All yields everything a leader times, for lease.Timers.Promote: each held
// lock under its name, each running lock-delay under DelayKey (a semaphore
// slot's under SlotDelayKey) with its start index for a token, and each
// held permit under PermitKey, each at its full length. It counts the
// grants (locks and permits) in held. Running lock-delays restart at full
// length too, for the same reason as leases: a delay may last longer across
// a failover, never shorter.
func All(f *fsm.FSM, held *int) iter.Seq[lease.Lease] {
	return func(yield func(lease.Lease) bool) {
		more := true
		f.EachLockUnordered(func(lk entry.Lock) { // the timers' heap orders them
			if more {
				*held++
				more = yield(lease.Lease{Key: lk.Name, Token: lk.Token, TTL: millis(lk.TTLMillis)})
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
				*held++
				more = yield(lease.Lease{Key: PermitKey(p.Semaphore, p.Token), Token: p.Token, TTL: millis(p.TTLMillis)})
			}
		}
	}
}

func millis(ms int64) time.Duration { return time.Duration(ms) * time.Millisecond }
