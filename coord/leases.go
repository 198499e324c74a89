package coord

import (
	"iter"
	"time"

	"github.com/fencer-io/fencer/coord/lease"
	"github.com/fencer-io/fencer/fsm"
	"github.com/fencer-io/fencer/fsm/entry"
)

// timedLeases yields every lease the leader times, for lease.Timers.Promote:
// each held lock under its name, each running lock-delay under delayKey (a
// semaphore slot's under slotDelayKey) with its start index for a token, and
// each held permit under permitKey. It
// counts the grants (locks and permits) in held. Running lock-delays restart
// at full length too, for the same reason as leases: a delay may last longer
// across a failover, never shorter.
func timedLeases(f *fsm.FSM, held *int) iter.Seq[lease.Lease] {
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
			key := delayKey(d.Lock)
			if d.Semaphore != "" {
				key = slotDelayKey(d.Semaphore, d.Since)
			}
			more = yield(lease.Lease{Key: key, Token: d.Since, TTL: millis(d.Millis)})
		}
		for _, sem := range f.Semaphores() {
			for _, p := range sem.Permits {
				if !more {
					return
				}
				*held++
				more = yield(lease.Lease{Key: permitKey(p.Semaphore, p.Token), Token: p.Token, TTL: millis(p.TTLMillis)})
			}
		}
	}
}

func millis(ms int64) time.Duration { return time.Duration(ms) * time.Millisecond }
