package workload

import (
	"context"
	"errors"
	"time"

	"github.com/fencer-io/fencer/api/client"
	"github.com/fencer-io/fencer/api/wire"
	"github.com/fencer-io/fencer/test/chaos/history"
)

// rwIteration is one pass of an rw client: take one of its locks, shared
// mostly and exclusive now and then (sometimes waiting, so that shared
// requests queue behind exclusive ones), hold it, release it. The checker
// judges from these records that no exclusive grant was certainly live
// beside any other grant of its lock (checker.RWExclusion). A durable rw
// client (Config.Durable) takes its locks exclusive mostly and waits
// durably, nearly always: the checker judges that its waiters were
// granted in the order they were enqueued (checker.DurableOrder).
func (w *worker) rwIteration(ctx context.Context) {
	lock := w.cfg.Locks[w.rng.IntN(len(w.cfg.Locks))]
	mode := wire.ModeShared
	if w.chance(0.3) || (w.cfg.Durable && w.chance(0.8)) {
		mode = wire.ModeExclusive
	}
	ttl := w.leaseTTL()
	var wait time.Duration
	if w.chance(0.6) || (w.cfg.Durable && w.chance(0.9)) {
		wait = time.Duration(w.rng.IntN(1500)) * time.Millisecond
	}
	if w.cfg.Durable && wait > 0 {
		wait += 500 * time.Millisecond // long enough to queue behind a holder
	}
	lease := w.rwAcquire(lock, mode, ttl, wait)
	if lease == nil {
		return
	}
	w.emit(Line{Ev: Hold, Lock: lock, Token: lease.Token(), TTLMillis: ttl.Milliseconds()})
	w.sleep(ctx, w.holdTime(ttl))
	w.emit(Line{Ev: Unhold})
	w.rwRelease(lease)
}

func (w *worker) rwAcquire(lock, mode string, ttl, wait time.Duration) *client.Lease {
	var lease *client.Lease
	durable := w.cfg.Durable && wait > 0
	op := history.Op{Kind: history.RWAcquire, Target: lock, Holder: w.holder(), Mode: mode, TTL: ttl.Milliseconds(), Durable: durable}
	opts := []client.AcquireOption{client.TTL(ttl), client.Wait(wait), client.Holder(w.holder()), client.Mode(mode)}
	if durable {
		opts = append(opts, client.Durable())
	}
	w.record(op, func(ctx context.Context, op *history.Op) {
		ctx, cancel := context.WithTimeout(ctx, opTimeout+wait)
		defer cancel()
		l, err := w.c.Acquire(ctx, lock, opts...)
		w.settle(op, err)
		var ae *client.APIError
		switch {
		case err == nil:
			lease = l
			op.Token, op.Lease, op.WaitIndex = l.Token(), l.Secret(), l.WaitIndex()
		case op.Outcome == history.LockHeld && errors.As(err, &ae):
			op.Token, op.HeldBy = ae.Token, ae.Holder
		}
	})
	return lease
}

// rwRelease makes a single attempt, as release does, and stops the
// keep-alive unrecorded if it went astray.
func (w *worker) rwRelease(l *client.Lease) {
	op := history.Op{Kind: history.RWRelease, Target: l.Name(), Token: l.Token(), Lease: l.Secret()}
	got := w.record(op, func(ctx context.Context, op *history.Op) {
		_, err := w.once.ReleaseRaw(ctx, l.Name(), l.Token(), l.Secret())
		w.settle(op, err)
	})
	if got.Outcome != history.OK && got.Outcome != history.LeaseLost {
		ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
		defer cancel()
		_ = l.Release(ctx)
	}
}
