package coord

import (
	"cmp"
	"errors"
	"slices"

	"github.com/fencer-io/fencer/cluster"
	"github.com/fencer-io/fencer/coord/internal/sim"
	"github.com/fencer-io/fencer/fsm/refusal"
)

// Multi-locks in the simulation: multi-acquires of two or three of the
// locks, in a random order, with and without a wait (queued in every
// name's FIFO beside the single waiters and sessions' grants), renewals
// and releases of what clients hold. The checker (coord/internal/sim,
// multi.go) holds them to "a multi-grant is one grant" beside the
// invariants every grant keeps (never two holders of a lock, tokens
// increasing, no lease ending early).

// clientMulti is a multi-grant a client holds, as it was answered.
type clientMulti struct {
	names  []string
	token  uint64
	secret string
}

func init() {
	simOps = append(simOps,
		simOp{"multi acquire", 4, (*simWorld).opMultiAcquire},
		simOp{"multi acquire with wait", 6, (*simWorld).opMultiAcquireWait},
		simOp{"multi renew", 4, (*simWorld).opMultiRenew},
		simOp{"multi release", 5, (*simWorld).opMultiRelease},
	)
	simWeights += 4 + 6 + 4 + 5
}

// multiNames draws two or three of the locks, in a random order.
func (w *simWorld) multiNames() []string {
	names := append([]string(nil), w.locks...)
	w.rng.Shuffle(len(names), func(i, j int) { names[i], names[j] = names[j], names[i] })
	return names[:2+w.rng.IntN(len(names)-1)]
}

func (w *simWorld) opMultiAcquire() {
	req := MultiAcquireRequest{Names: w.multiNames(), Holder: w.holder(), TTL: w.duration(200, 3000), RequestID: w.requestID()}
	res, err := w.s.MultiAcquire(bg, req)
	w.multiAcquired(req.Names, res.Grant.Token, res.Grant.Lease, res.Existing, err)
}

func (w *simWorld) opMultiAcquireWait() {
	x := w.waiter(sim.Key{Kind: sim.Lock, Name: w.locks[0]})
	x.multi = w.multiNames()
	w.check.Answered(x.key, x.req) // registered for its names instead
	w.check.QueuedMulti(x.multi, x.req)
	w.check.WaitEnds(x.req, w.clock.Now().Add(x.waitD))
	go func() {
		res, err := w.s.MultiAcquire(bg, MultiAcquireRequest{Names: x.multi, Holder: x.holder, TTL: x.ttl, Wait: x.waitD, RequestID: x.req})
		w.results <- simResult{id: x.id, multi: res, err: err}
	}()
}

// multiAcquired records a multi-acquire's answer.
func (w *simWorld) multiAcquired(names []string, token uint64, secret string, existing bool, err error) {
	switch {
	case err == nil:
		w.multis = append(w.multis, clientMulti{names: names, token: token, secret: secret})
		if existing {
			for _, n := range names {
				w.check.Restarted(sim.Key{Kind: sim.Lock, Name: n}, token, w.clock.Now())
			}
		}
		w.stats["multi answer: granted"]++
	case errors.Is(err, cluster.ErrOutcomeUnknown):
		w.stats["multi answer: outcome unknown"]++ // expires in its time
	default:
		w.stats["multi answer: refused"]++
	}
}

// multi picks a multi-grant a client holds, live or (now and then) ended;
// ended ones are forgotten.
func (w *simWorld) multi() (clientMulti, bool, bool) {
	// By token: waiters answered in one step arrive in any order.
	slices.SortStableFunc(w.multis, func(a, b clientMulti) int { return cmp.Compare(a.token, b.token) })
	live := w.multis[:0]
	for _, m := range w.multis {
		if _, ok := w.check.Live(sim.Key{Kind: sim.Lock, Name: m.names[0]}, m.token); ok || w.rng.IntN(16) == 0 {
			live = append(live, m)
		}
	}
	w.multis = live
	if len(live) == 0 {
		return clientMulti{}, false, false
	}
	m := live[w.rng.IntN(len(live))]
	_, isLive := w.check.Live(sim.Key{Kind: sim.Lock, Name: m.names[0]}, m.token)
	return m, isLive, true
}

func (w *simWorld) opMultiRenew() {
	m, live, ok := w.multi()
	if !ok {
		return
	}
	_, err := w.s.RenewMulti(bg, m.token, m.secret)
	if err == nil {
		for _, n := range m.names {
			w.check.Restarted(sim.Key{Kind: sim.Lock, Name: n}, m.token, w.clock.Now())
		}
	}
	w.multiAnswered("multi renew", m, live, err)
}

func (w *simWorld) opMultiRelease() {
	m, live, ok := w.multi()
	if !ok {
		return
	}
	_, err := w.s.ReleaseMulti(bg, m.token, m.secret)
	w.multiAnswered("multi release", m, live, err)
}

// multiAnswered holds a renewal or release of a multi-grant to what it
// must answer, as answered does a grant's.
func (w *simWorld) multiAnswered(what string, m clientMulti, live bool, err error) {
	faulted := w.faulting && (errors.Is(err, cluster.ErrNotLeader) || errors.Is(err, cluster.ErrOutcomeUnknown))
	switch {
	case faulted:
	case err == nil && !live:
		w.fail("%s of ended multi-grant %d (%v) succeeded", what, m.token, m.names)
	case err != nil && live:
		w.fail("%s of live multi-grant %d (%v): %v", what, m.token, m.names, err)
	case err != nil && !live && !errors.Is(err, refusal.ErrLeaseLost):
		w.fail("%s of ended multi-grant %d (%v): %v, not a lost lease", what, m.token, m.names, err)
	}
	if err == nil {
		w.stats[what+": done"]++
	} else {
		w.stats[what+": refused"]++
	}
}
