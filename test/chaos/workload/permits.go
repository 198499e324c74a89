package workload

import (
	"context"
	"time"

	"github.com/fencer-io/fencer/api/client"
	"github.com/fencer-io/fencer/test/chaos/history"
)

// permitIteration is one pass of a semaphore client: take a permit
// (sometimes waiting for one, sometimes with a lock-delay, which delays
// its slot if a pause lets it expire), hold it, maybe renew it, release
// it. The checker judges from these records that no more than the limit
// were held at once.
func (w *worker) permitIteration(ctx context.Context) {
	ttl := w.leaseTTL()
	var wait, delay time.Duration
	if w.chance(0.6) {
		wait = time.Duration(w.rng.IntN(1500)) * time.Millisecond
	}
	if w.chance(0.3) {
		delay = time.Duration(200+w.rng.IntN(800)) * time.Millisecond
	}
	lease := w.acquirePermit(ttl, wait, delay)
	if lease == nil {
		return
	}
	w.emit(Line{Ev: Hold, Lock: "semaphore " + w.cfg.Semaphore, Token: lease.Token(), TTLMillis: ttl.Milliseconds()})
	w.sleep(ctx, w.holdTime(ttl))
	w.emit(Line{Ev: Unhold})
	if w.chance(0.5) {
		w.renewPermit(lease)
	}
	w.releasePermit(lease)
}

func (w *worker) acquirePermit(ttl, wait, delay time.Duration) *client.Lease {
	var lease *client.Lease
	op := history.Op{Kind: history.SemAcquire, Target: w.cfg.Semaphore, Holder: w.holder(),
		Limit: w.cfg.Limit, TTL: ttl.Milliseconds()}
	w.record(op, func(ctx context.Context, op *history.Op) {
		ctx, cancel := context.WithTimeout(ctx, opTimeout+wait)
		defer cancel()
		l, err := w.c.AcquirePermit(ctx, w.cfg.Semaphore, w.cfg.Limit, client.TTL(ttl), client.Wait(wait), client.Holder(w.holder()), client.LockDelay(delay))
		w.settle(op, err)
		if err == nil {
			lease = l
			op.Token, op.Lease = l.Token(), l.Secret()
		}
	})
	return lease
}

func (w *worker) renewPermit(l *client.Lease) {
	op := history.Op{Kind: history.SemRenew, Target: l.Name(), Token: l.Token(), Lease: l.Secret()}
	w.record(op, func(ctx context.Context, op *history.Op) {
		_, err := w.c.RenewPermitRaw(ctx, l.Name(), l.Token(), l.Secret())
		w.settle(op, err)
	})
}

// releasePermit makes a single attempt, as release does, for the same
// reason, and stops the keep-alive unrecorded if it went astray.
func (w *worker) releasePermit(l *client.Lease) {
	op := history.Op{Kind: history.SemRelease, Target: l.Name(), Token: l.Token(), Lease: l.Secret()}
	got := w.record(op, func(ctx context.Context, op *history.Op) {
		w.settle(op, w.once.ReleasePermitRaw(ctx, l.Name(), l.Token(), l.Secret()))
	})
	if got.Outcome != history.OK && got.Outcome != history.LeaseLost {
		ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
		defer cancel()
		_ = l.Release(ctx)
	}
}
