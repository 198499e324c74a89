package workload

import (
	"context"
	"slices"
	"strings"
	"time"

	"github.com/fencer-io/fencer/api/wire"
	"github.com/fencer-io/fencer/test/chaos/history"
)

// A lock client sometimes takes a multi-lock instead of one lock: two to
// four names at once, every name or none, with one token. The names are
// the client's locks prefixed with multiPrefix, a namespace of their own
// that no single acquire or read touches, so that the lock model judges
// single locks alone; a multi-grant is judged by checker.MultiGrants (all
// its names carry its one token, granted and ended at one index). It
// writes once, bound to one of its names, renews its one lease, and
// releases it, or now and then stalls past its TTL, so that its expiry
// ends every name, and writes with the old token again, which the binding
// must refuse. Half of them wait (wait_ms) in every name's FIFO, where
// clients asking for crossing names queue behind one another: none may
// deadlock, and no two multi-grants may hold a name at once.

// multiChance is the share of a lock client's iterations that take a
// multi-lock; multiStallChance the share of those that stall.
const (
	multiChance      = 0.15
	multiStallChance = 0.2
	multiWaitChance  = 0.5
	multiPrefix      = "multi."
)

// MultiNames are the names multi-locks take, for the lock names locks.
func MultiNames(locks []string) []string {
	out := make([]string, len(locks))
	for i, l := range locks {
		out[i] = multiPrefix + l
	}
	return out
}

// multiGrant is a held multi-lock as the client knows it.
type multiGrant struct {
	names []string
	token uint64
	lease string
}

func (w *worker) multiIteration(ctx context.Context) {
	names := MultiNames(w.cfg.Locks)
	w.rng.Shuffle(len(names), func(i, j int) { names[i], names[j] = names[j], names[i] })
	names = names[:min(len(names), 2+w.rng.IntN(3))]
	ttl := w.leaseTTL()
	var wait time.Duration
	if w.chance(multiWaitChance) {
		wait = ttl + time.Duration(w.rng.Int64N(int64(ttl)))
	}
	m := w.multiAcquire(names, ttl, wait)
	if m == nil {
		return
	}
	bound := m.names[w.rng.IntN(len(m.names))]
	if w.chance(multiStallChance) {
		// Stalled past the TTL (not cut short by ctx: the point is to
		// wake after the expiry), its first bound write kept for after,
		// where only the binding can refuse it (a second with the same
		// token would be refused stale whatever the lock).
		w.sleep(context.Background(), ttl+ttl/2+time.Duration(w.rng.Int64N(int64(ttl))))
		w.putKV(bound, m.token, true)
		w.multiRelease(m) // lease_lost: its expiry ended it
		return
	}
	w.putKV(bound, m.token, true)
	w.sleep(ctx, time.Duration(w.rng.Int64N(int64(ttl/3)))+10*time.Millisecond)
	if w.multiRenew(m) {
		w.sleep(ctx, time.Duration(w.rng.Int64N(int64(ttl/3))))
	}
	w.multiRelease(m)
}

func (w *worker) multiAcquire(names []string, ttl, wait time.Duration) *multiGrant {
	var m *multiGrant
	op := history.Op{Kind: history.MultiAcquire, Target: strings.Join(names, ","), Names: slices.Clone(names), Holder: w.holder(), TTL: ttl.Milliseconds()}
	w.record(op, func(ctx context.Context, op *history.Op) {
		ctx, cancel := context.WithTimeout(ctx, opTimeout+wait)
		defer cancel()
		var got wire.MultiGrant
		body := wire.MultiAcquireRequest{Names: names, Holder: w.holder(), TTLMillis: ttl.Milliseconds(), WaitMs: wait.Milliseconds(),
			RequestID: w.requestID()}
		settleRaw(op, w.raw.Call(ctx, "POST", "/v1/locks/acquire", wait, body, &got))
		if op.Outcome == history.OK {
			m = &multiGrant{names: got.Names, token: got.Token, lease: got.Lease}
			op.Token, op.Lease = got.Token, got.Lease
		}
	})
	return m
}

// multiRenew renews m once; it reports whether it was renewed.
func (w *worker) multiRenew(m *multiGrant) bool {
	op := history.Op{Kind: history.MultiRenew, Target: strings.Join(m.names, ","), Names: m.names, Token: m.token, Lease: m.lease}
	got := w.record(op, func(ctx context.Context, op *history.Op) {
		var out wire.MultiRenewResponse
		settleRaw(op, w.raw.Call(ctx, "POST", "/v1/locks/renew", 0, wire.LeaseRequest{Lease: m.lease, Token: m.token}, &out))
	})
	return got.Outcome == history.OK
}

func (w *worker) multiRelease(m *multiGrant) {
	op := history.Op{Kind: history.MultiRelease, Target: strings.Join(m.names, ","), Names: m.names, Token: m.token, Lease: m.lease}
	w.record(op, func(ctx context.Context, op *history.Op) {
		var out wire.MultiReleaseResponse
		settleRaw(op, w.raw.Call(ctx, "POST", "/v1/locks/release", 0, wire.LeaseRequest{Lease: m.lease, Token: m.token}, &out))
	})
}
