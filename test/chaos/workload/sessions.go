package workload

import (
	"context"
	"fmt"
	"net/url"
	"strconv"
	"sync"
	"time"

	"github.com/fencer-io/fencer/api/wire"
	"github.com/fencer-io/fencer/test/chaos/history"
)

// A session client holds many grants under one lease: each iteration opens
// a session, takes every one of its locks and a permit of its semaphore
// under it, keeps the session (never the grants) alive from a goroutine of
// its own, writes with every grant's token, and closes the session. Some
// iterations, chosen by the seed, stall instead: the client stops renewing,
// sleeps past the session's TTL, and on waking writes with its old tokens
// again, as a client paused by the kernel or a long collection would. Its
// lock-bound writes must then be refused: the session's end ended every
// grant under it (checker.SessionWrites).

// sessionStallChance is the share of iterations that stall past the TTL.
const sessionStallChance = 0.25

// session is an open session as the client knows it.
type session struct {
	id    uint64
	lease string
	ttl   time.Duration
}

// sessionGrant is one grant held under a session.
type sessionGrant struct {
	permit bool // a permit of the client's semaphore; else a lock's grant
	name   string
	token  uint64
	lease  string
	kv     bool // a lock-bound put with token may have landed
}

// sessionBody is an acquire under a session, a lock's or a permit's: no
// ttl_ms at all, as the contract asks (the grant takes the session's).
type sessionBody struct {
	Holder       string `json:"holder"`
	Limit        int    `json:"limit,omitempty"`
	WaitMs       int64  `json:"wait_ms"`
	RequestID    string `json:"request_id"`
	Session      uint64 `json:"session"`
	SessionLease string `json:"session_lease"`
}

func (w *worker) sessionIteration(ctx context.Context) {
	ttl := w.leaseTTL()
	s := w.createSession(ttl)
	if s == nil {
		return
	}
	keep := w.keepSession(s)
	var held []*sessionGrant
	for _, lock := range w.cfg.Locks {
		if g := w.acquireUnder(s, lock, w.sessionWait()); g != nil {
			held = append(held, g)
		}
	}
	if g := w.permitUnder(s, w.sessionWait()); g != nil {
		held = append(held, g)
	}
	stall := w.chance(sessionStallChance)
	for _, g := range held {
		// A stalling client keeps its first lock-bound put for after it
		// wakes, where only the lock binding can refuse it.
		w.writeUnder(g, 1, !stall && w.chance(0.6))
	}
	if len(held) > 0 {
		w.emit(Line{Ev: Hold, Lock: fmt.Sprintf("session s%d", s.id), Token: held[0].token, TTLMillis: ttl.Milliseconds()})
		w.sleep(ctx, w.holdTime(ttl))
		w.emit(Line{Ev: Unhold})
	}
	if stall {
		keep.stop()
		// Not cut short by ctx: the point is to wake after the session's
		// end, which is at most 2.5 TTLs away.
		w.sleep(context.Background(), ttl+ttl/2+time.Duration(w.rng.Int64N(int64(ttl))))
		for _, g := range held {
			w.writeUnder(g, 2, true)
		}
		// The keep-alive wakes too, and is told the session is over; the
		// writes after that are refused for certain (checker.SessionWrites
		// judges them by time as well as by index).
		if w.renewSession(s) {
			for _, g := range held {
				w.writeUnder(g, 3, true)
				if !g.permit && w.chance(0.5) {
					w.read(g.name)
				}
			}
		}
		return
	}
	for _, g := range held {
		w.writeUnder(g, 2, w.chance(0.5))
	}
	if len(held) > 1 && w.chance(0.2) {
		// Releasing one grant keeps the session and its other grants.
		w.releaseUnder(s, held[0])
		held = held[1:]
	}
	keep.stop()
	w.closeSession(s)
	if len(held) > 0 && w.chance(0.3) {
		g := held[w.rng.IntN(len(held))]
		w.writeUnder(g, 4, true)
		if !g.permit {
			w.read(g.name)
		}
	}
}

// sessionWait is how long an acquire under a session may wait.
func (w *worker) sessionWait() time.Duration {
	if w.chance(0.3) {
		return 0
	}
	return time.Duration(w.rng.IntN(1000)) * time.Millisecond
}

// requestID names one request for all its attempts, so that a retry after
// a lost answer gets the first one's session or grant back; unique in the
// client's process, and 16 characters at least, as the service asks.
func (w *worker) requestID() string {
	return fmt.Sprintf("chaos-c%03d-r%08d", w.cfg.Client, w.id.Load()+1)
}

func sessionPath(id uint64, op string) string {
	return "/v1/sessions/" + strconv.FormatUint(id, 10) + "/" + op
}

func (w *worker) createSession(ttl time.Duration) *session {
	var s *session
	op := history.Op{Kind: history.SessionCreate, Target: w.holder(), Holder: w.holder(), TTL: ttl.Milliseconds()}
	w.record(op, func(ctx context.Context, op *history.Op) {
		var got wire.Session
		body := wire.SessionRequest{Holder: w.holder(), TTLMillis: ttl.Milliseconds(), RequestID: w.requestID()}
		settleRaw(op, w.raw.Call(ctx, "POST", "/v1/sessions", 0, body, &got))
		if op.Outcome == history.OK {
			s = &session{id: got.Session, lease: got.Lease, ttl: ttl}
			op.Session, op.Lease = got.Session, got.Lease
		}
	})
	return s
}

// renewSession renews s once; it reports whether the session is known to
// have ended.
func (w *worker) renewSession(s *session) bool {
	op := history.Op{Kind: history.SessionRenew, Target: w.holder(), Session: s.id, Lease: s.lease}
	got := w.record(op, func(ctx context.Context, op *history.Op) {
		var out wire.SessionRenewResponse
		settleRaw(op, w.raw.Call(ctx, "POST", sessionPath(s.id, "renew"), 0, wire.SessionLeaseRequest{Lease: s.lease}, &out))
	})
	return got.Outcome == history.SessionExpired
}

func (w *worker) closeSession(s *session) {
	op := history.Op{Kind: history.SessionClose, Target: w.holder(), Session: s.id, Lease: s.lease}
	w.record(op, func(ctx context.Context, op *history.Op) {
		var out wire.SessionCloseResponse
		settleRaw(op, w.raw.Call(ctx, "POST", sessionPath(s.id, "close"), 0, wire.SessionLeaseRequest{Lease: s.lease}, &out))
		for _, g := range out.Released {
			op.Released = append(op.Released, g.Token)
		}
	})
}

// keeper renews one session every third of its TTL until stopped or told
// the session ended.
type keeper struct {
	cancel context.CancelFunc
	done   chan struct{}
	once   sync.Once
}

func (w *worker) keepSession(s *session) *keeper {
	ctx, cancel := context.WithCancel(context.Background())
	k := &keeper{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(k.done)
		for {
			w.sleep(ctx, s.ttl/3)
			if ctx.Err() != nil || w.renewSession(s) {
				return
			}
		}
	}()
	return k
}

func (k *keeper) stop() {
	k.once.Do(func() {
		k.cancel()
		<-k.done
	})
}

func (w *worker) acquireUnder(s *session, lock string, wait time.Duration) *sessionGrant {
	var g *sessionGrant
	op := history.Op{Kind: history.Acquire, Target: lock, Holder: w.holder(), Session: s.id}
	w.record(op, func(ctx context.Context, op *history.Op) {
		ctx, cancel := context.WithTimeout(ctx, opTimeout+wait)
		defer cancel()
		var got wire.Grant
		body := sessionBody{Holder: w.holder(), WaitMs: wait.Milliseconds(), RequestID: w.requestID(), Session: s.id, SessionLease: s.lease}
		settleRaw(op, w.raw.Call(ctx, "POST", "/v1/locks/"+url.PathEscape(lock)+"/acquire", wait, body, &got))
		if op.Outcome == history.OK {
			g = &sessionGrant{name: lock, token: got.Token, lease: got.Lease}
			op.Token, op.Lease = got.Token, got.Lease
		}
	})
	return g
}

func (w *worker) permitUnder(s *session, wait time.Duration) *sessionGrant {
	var g *sessionGrant
	op := history.Op{Kind: history.SemAcquire, Target: w.cfg.Semaphore, Holder: w.holder(), Limit: w.cfg.Limit,
		TTL: s.ttl.Milliseconds(), Session: s.id}
	w.record(op, func(ctx context.Context, op *history.Op) {
		ctx, cancel := context.WithTimeout(ctx, opTimeout+wait)
		defer cancel()
		var got wire.PermitGrant
		body := sessionBody{Holder: w.holder(), Limit: w.cfg.Limit, WaitMs: wait.Milliseconds(), RequestID: w.requestID(), Session: s.id, SessionLease: s.lease}
		settleRaw(op, w.raw.Call(ctx, "POST", "/v1/semaphores/"+url.PathEscape(w.cfg.Semaphore)+"/acquire", wait, body, &got))
		if op.Outcome == history.OK {
			g = &sessionGrant{permit: true, name: w.cfg.Semaphore, token: got.Token, lease: got.Lease}
			op.Token, op.Lease = got.Token, got.Lease
		}
	})
	return g
}

// writeUnder writes with g's token through the resource (stamped with
// seq) and, if kv, for a lock's grant, puts the lock's key bound to the
// lock, which the cluster accepts only while g is the lock's current
// grant. It makes one such put per grant that may have landed: a second
// with the same token would be refused stale whatever the lock, and so
// would say nothing of the binding.
func (w *worker) writeUnder(g *sessionGrant, seq uint64, kv bool) {
	w.putResource(g.name, g.token, seq)
	if kv && !g.permit && !g.kv {
		got := w.putKV(g.name, g.token, true)
		g.kv = got.Outcome == history.OK || got.Outcome.Indeterminate()
	}
}

// releaseUnder releases one grant of s in a single attempt, as release
// does and for the same reason.
func (w *worker) releaseUnder(s *session, g *sessionGrant) {
	kind := history.Release
	if g.permit {
		kind = history.SemRelease
	}
	op := history.Op{Kind: kind, Target: g.name, Token: g.token, Lease: g.lease, Session: s.id}
	w.record(op, func(ctx context.Context, op *history.Op) {
		if g.permit {
			w.settle(op, w.once.ReleasePermitRaw(ctx, g.name, g.token, g.lease))
			return
		}
		_, err := w.once.ReleaseRaw(ctx, g.name, g.token, g.lease)
		w.settle(op, err)
	})
}
