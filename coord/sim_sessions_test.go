package coord

import (
	"errors"
	"slices"
	"time"

	"github.com/fencer-io/fencer/cluster"
	"github.com/fencer-io/fencer/coord/internal/sim"
	"github.com/fencer-io/fencer/fsm"
	"github.com/fencer-io/fencer/fsm/refusal"
)

// The simulation's session operations (sim_test.go holds the rest): open
// a session (with and without a lock-delay), acquire locks and permits
// under it (with and without a wait; also under an ended session, an
// unknown one, and with a wrong secret), renew it, close it, let its TTL
// run out, and release or renew one grant under it.

// sessionIDUnknown is an id no session has: above every index an episode
// reaches.
const sessionIDUnknown = 1 << 40

func (w *simWorld) opSessionCreate() {
	req := SessionRequest{Holder: w.holder(), TTL: w.duration(500, 3000), RequestID: w.requestID()}
	if w.rng.IntN(3) == 0 {
		req.LockDelay = w.duration(50, 1500)
	}
	res, err := w.s.CreateSession(bg, req)
	w.sessionCreated(req, res, err)
}

// retrySessionCreate retries a create answered outcome-unknown, with its
// request id: the session it opened, if it did, comes back (Existing).
func (w *simWorld) retrySessionCreate() {
	i := w.rng.IntN(len(w.unknownS))
	req := w.unknownS[i]
	w.unknownS = append(w.unknownS[:i], w.unknownS[i+1:]...)
	res, err := w.s.CreateSession(bg, req)
	w.sessionCreated(req, res, err)
}

func (w *simWorld) sessionCreated(req SessionRequest, res fsm.SessionResult, err error) {
	faulted := w.faulting && (errors.Is(err, cluster.ErrNotLeader) || errors.Is(err, cluster.ErrOutcomeUnknown))
	switch {
	case err == nil:
		if res.Existing {
			w.check.SessionRestarted(res.Session.ID, w.clock.Now())
			w.stats["session create: existing"]++
		} else {
			w.stats["session create: done"]++
		}
		for _, cs := range w.sessions {
			if cs.id == res.Session.ID {
				return
			}
		}
		w.sessions = append(w.sessions, &clientSession{id: res.Session.ID, holder: req.Holder, secret: res.Session.Lease, delay: req.LockDelay})
	case errors.Is(err, cluster.ErrOutcomeUnknown):
		w.unknownS = append(w.unknownS, req)
		w.stats["session create: outcome unknown"]++
	case faulted:
		w.stats["session create: refused"]++
	case errors.Is(err, refusal.ErrSessionExpired):
		// A retry of a create whose session has ended since.
		w.stats["session create: refused"]++
	default:
		w.fail("session create for %s: %v", req.Holder, err)
	}
}

// session picks a session a client opened: mostly one the checker
// believes live, sometimes one that may have ended. Ended ones are
// forgotten.
func (w *simWorld) session() (*clientSession, bool) {
	kept := w.sessions[:0]
	for _, cs := range w.sessions {
		if _, live, _, _ := w.check.SessionOf(cs.id); live || w.rng.IntN(16) == 0 {
			kept = append(kept, cs)
		}
	}
	clear(w.sessions[len(kept):])
	w.sessions = kept
	if len(w.sessions) == 0 {
		return nil, false
	}
	return w.sessions[w.rng.IntN(len(w.sessions))], true
}

// sessionAsk prepares an acquire of key under a session: now and then
// with a wrong secret or under an id no session has. want is the refusal
// its answer must be, nil when the session is live and the secret its.
func (w *simWorld) sessionAsk(key sim.Key) (a simAsk, delay time.Duration, want error, ok bool) {
	cs, ok := w.session()
	if !ok {
		return simAsk{}, 0, nil, false
	}
	a = simAsk{key: key, holder: cs.holder, req: w.requestID(), session: cs.id, sessionLease: cs.secret}
	switch n := w.rng.IntN(20); {
	case n < 2:
		a.sessionLease = "not-the-session's-lease"
	case n < 3:
		a.session = sessionIDUnknown + uint64(w.rng.IntN(1000))
	}
	_, live, _, ended := w.check.SessionOf(a.session)
	switch {
	case ended:
		want = refusal.ErrSessionExpired
	case !live:
		want = refusal.ErrUnknownSession
	case a.sessionLease != cs.secret:
		want = refusal.ErrSessionMismatch
	}
	return a, w.sessionGrantDelay(cs), want, true
}

// sessionGrantDelay is the lock-delay a grant under cs asks for: under a
// session with one, the first may ask for none (and takes the session's),
// the others ask for their own; under one without, as any acquire.
func (w *simWorld) sessionGrantDelay(cs *clientSession) time.Duration {
	if cs.delay == 0 {
		return w.lockDelay()
	}
	if !cs.defaultTaken && w.rng.IntN(2) == 0 {
		cs.defaultTaken = true
		return 0
	}
	return w.duration(50, 1500)
}

func (w *simWorld) opSessionAcquire() {
	key := sim.Key{Kind: sim.Lock, Name: w.locks[w.rng.IntN(len(w.locks))]}
	a, delay, want, ok := w.sessionAsk(key)
	if !ok {
		return
	}
	res, err := w.s.Acquire(bg, AcquireRequest{Lock: key.Name, Holder: a.holder, RequestID: a.req, LockDelay: delay,
		Session: a.session, SessionLease: a.sessionLease})
	w.sessionAnswered("acquire", a.session, want, err)
	w.acquired(a, res.Grant.Token, res.Grant.Lease, res.Existing, err)
}

func (w *simWorld) opSessionPermit() {
	name := w.sems[w.rng.IntN(len(w.sems))]
	key := sim.Key{Kind: sim.Semaphore, Name: name}
	a, delay, want, ok := w.sessionAsk(key)
	if !ok {
		return
	}
	res, err := w.s.AcquirePermit(bg, PermitRequest{Semaphore: name, Holder: a.holder, Limit: w.limit[name], RequestID: a.req, LockDelay: delay,
		Session: a.session, SessionLease: a.sessionLease})
	w.sessionAnswered("permit", a.session, want, err)
	w.acquired(a, res.Permit.Token, res.Permit.Lease, res.Existing, err)
}

func (w *simWorld) opSessionAcquireWait() {
	x, ok := w.sessionWaiter(sim.Key{Kind: sim.Lock, Name: w.locks[w.rng.IntN(len(w.locks))]})
	if !ok {
		return
	}
	go func() {
		res, err := w.s.Acquire(bg, AcquireRequest{Lock: x.key.Name, Holder: x.holder, Wait: x.waitD, RequestID: x.req, LockDelay: x.delay,
			Session: x.session, SessionLease: x.sessionLease})
		w.results <- simResult{id: x.id, lock: res, err: err}
	}()
}

func (w *simWorld) opSessionPermitWait() {
	name := w.sems[w.rng.IntN(len(w.sems))]
	x, ok := w.sessionWaiter(sim.Key{Kind: sim.Semaphore, Name: name})
	if !ok {
		return
	}
	go func() {
		res, err := w.s.AcquirePermit(bg, PermitRequest{Semaphore: name, Holder: x.holder, Limit: w.limit[name], Wait: x.waitD, RequestID: x.req,
			LockDelay: x.delay, Session: x.session, SessionLease: x.sessionLease})
		w.results <- simResult{id: x.id, permit: res, err: err}
	}()
}

// sessionWaiter prepares an acquire under a session that may queue (see
// waiter). It has no TTL of its own: its session's.
func (w *simWorld) sessionWaiter(key sim.Key) (*simWaiter, bool) {
	a, delay, want, ok := w.sessionAsk(key)
	if !ok {
		return nil, false
	}
	x := &simWaiter{id: w.nextID + 1, key: key, holder: a.holder, req: a.req, delay: delay,
		session: a.session, sessionLease: a.sessionLease, want: want}
	w.nextID++
	x.waitD = w.duration(50, 4000) + time.Duration(1+x.id%997)*time.Nanosecond
	x.wait = w.clock.Expect(x.waitD)
	if want == nil {
		// Refused before it could queue otherwise, and never offered.
		w.check.Queued(key, x.req)
	}
	// Its wait ends then, as any waiter's: it leaves the FIFO.
	w.check.WaitEnds(x.req, w.clock.Now().Add(x.waitD))
	w.waiters[x.id] = x
	return x, true
}

// sessionAnswered holds an acquire under session id to its answer: the
// refusal want, or (want nil) anything but a session's refusal, except
// for an acquire with a wait, whose session may end while it waits.
func (w *simWorld) sessionAnswered(what string, id uint64, want, err error) {
	if w.faulting && (errors.Is(err, cluster.ErrNotLeader) || errors.Is(err, cluster.ErrOutcomeUnknown)) {
		return
	}
	waited := what == "acquire with wait"
	switch {
	case want != nil && !errors.Is(err, want):
		w.fail("%s under session %d: %v, want %v", what, id, err, want)
	case want == nil && (errors.Is(err, refusal.ErrSessionMismatch) || errors.Is(err, refusal.ErrUnknownSession)):
		w.fail("%s under live session %d with its lease: %v", what, id, err)
	case want == nil && !waited && errors.Is(err, refusal.ErrSessionExpired):
		w.fail("%s under live session %d with its lease: %v", what, id, err)
	}
	if want != nil {
		w.stats["session refusal: "+want.Error()]++
	}
}

// sessionCall picks a session and the secret to present (now and then a
// wrong one) and says what the answer must be: nil for a live session and
// its secret.
func (w *simWorld) sessionCall() (cs *clientSession, secret string, want error, ok bool) {
	if cs, ok = w.session(); !ok {
		return nil, "", nil, false
	}
	secret = cs.secret
	if w.rng.IntN(10) == 0 {
		secret = "not-the-session's-lease"
	}
	_, live, _, _ := w.check.SessionOf(cs.id)
	switch {
	case !live:
		want = refusal.ErrSessionExpired
	case secret != cs.secret:
		want = refusal.ErrSessionMismatch
	}
	return cs, secret, want, true
}

func (w *simWorld) opSessionRenew() {
	cs, secret, want, ok := w.sessionCall()
	if !ok {
		return
	}
	_, err := w.s.RenewSession(bg, cs.id, secret)
	switch {
	case want == nil && err == nil:
		w.check.SessionRestarted(cs.id, w.clock.Now())
		w.stats["session renew: done"]++
	case want == nil || !errors.Is(err, want):
		w.fail("renewal of session %d: %v, want %v", cs.id, err, want)
	default:
		w.stats["session renew: refused"]++
	}
}

func (w *simWorld) opSessionClose() {
	cs, secret, want, ok := w.sessionCall()
	if !ok {
		return
	}
	held := w.check.SessionGrants(cs.id)
	ended, err := w.s.CloseSession(bg, cs.id, secret)
	faulted := w.faulting && (errors.Is(err, cluster.ErrNotLeader) || errors.Is(err, cluster.ErrOutcomeUnknown))
	switch {
	case faulted:
		w.stats["session close: refused"]++
	case want == nil && err == nil:
		w.stats["session close: done"]++
		var got []sim.GrantRef
		for _, g := range ended {
			got = append(got, grantRef(g))
		}
		if !slices.Equal(got, held) {
			w.fail("close of session %d released %v, it held %v", cs.id, got, held)
		}
	case want == nil || !errors.Is(err, want):
		w.fail("close of session %d: %v, want %v", cs.id, err, want)
	default:
		w.stats["session close: refused"]++
	}
}

func grantRef(g fsm.SessionGrant) sim.GrantRef {
	k := sim.Key{Kind: sim.Lock, Name: g.Name}
	if g.Semaphore {
		k.Kind = sim.Semaphore
	}
	return sim.GrantRef{Key: k, Token: g.Token}
}

// sessionGrant picks a grant under a session that a client holds, as
// grant does.
func (w *simWorld) sessionGrant() (clientGrant, bool, bool) {
	var pool []clientGrant
	for _, g := range w.grants {
		if g.session != 0 {
			pool = append(pool, g)
		}
	}
	if len(pool) == 0 {
		return clientGrant{}, false, false
	}
	g := pool[w.rng.IntN(len(pool))]
	_, live := w.check.Live(g.key, g.token)
	return g, live, true
}

// opSessionRelease releases one grant under a session: the session and
// its other grants stay (the FSM's sessions are compared with the log's
// after every step).
func (w *simWorld) opSessionRelease() {
	g, live, ok := w.sessionGrant()
	if !ok {
		return
	}
	var err error
	if g.key.Kind == sim.Lock {
		err = w.s.Release(bg, g.key.Name, g.token, g.secret)
	} else {
		err = w.s.ReleasePermit(bg, g.key.Name, g.token, g.secret)
	}
	w.answered("session grant release", g, live, err)
}

func (w *simWorld) opSessionGrantRenew() {
	if g, live, ok := w.sessionGrant(); ok {
		w.renewUnderSession(g, live)
	}
}

// renewUnderSession renews a grant under a session, which is refused: a
// live one is session_grant (renew the session), an ended one lease_lost.
func (w *simWorld) renewUnderSession(g clientGrant, live bool) {
	var err error
	if g.key.Kind == sim.Lock {
		_, err = w.s.Renew(bg, g.key.Name, g.token, g.secret)
	} else {
		_, err = w.s.RenewPermit(bg, g.key.Name, g.token, g.secret)
	}
	want := refusal.ErrSessionGrant
	if !live {
		want = refusal.ErrLeaseLost
	}
	if !errors.Is(err, want) {
		w.fail("renewal of %s's grant %d under session %d: %v, want %v", g.key, g.token, g.session, err, want)
	}
	w.stats["session grant renew: refused"]++
}

// opWaitOnSession queues an acquire, under no session, for a name a live
// session holds: so that a session's end frees names with waiters, some
// after the first, which must be served in the entries right after it.
func (w *simWorld) opWaitOnSession() {
	ids := w.check.LiveSessions()
	if len(ids) == 0 {
		return
	}
	gs := w.check.SessionGrants(ids[w.rng.IntN(len(ids))])
	if len(gs) == 0 {
		return
	}
	key := gs[w.rng.IntN(len(gs))].Key
	x := w.waiter(key)
	go func() {
		if key.Kind == sim.Lock {
			res, err := w.s.Acquire(bg, AcquireRequest{Lock: key.Name, Holder: x.holder, TTL: x.ttl, Wait: x.waitD, RequestID: x.req, LockDelay: x.delay})
			w.results <- simResult{id: x.id, lock: res, err: err}
			return
		}
		res, err := w.s.AcquirePermit(bg, PermitRequest{Semaphore: key.Name, Holder: x.holder, Limit: w.limit[key.Name], TTL: x.ttl, Wait: x.waitD,
			RequestID: x.req, LockDelay: x.delay})
		w.results <- simResult{id: x.id, permit: res, err: err}
	}()
}

// opMissSessionRenewals moves time just past a live session's deadline
// (its last start plus its TTL): its client missed its renewals.
func (w *simWorld) opMissSessionRenewals() {
	ids := w.check.LiveSessions()
	if len(ids) == 0 {
		w.opTick()
		return
	}
	s, _, _, _ := w.check.SessionOf(ids[w.rng.IntN(len(ids))])
	d := s.Start.Add(s.TTL).Sub(w.clock.Now()) + time.Duration(1+w.rng.IntN(50))*time.Millisecond
	w.advance(max(d, time.Millisecond))
}

// checkSessions compares the FSM's sessions with the checker's.
func (w *simWorld) checkSessions() {
	var views []sim.SessionView
	for _, st := range w.f.fsm.Sessions() {
		v := sim.SessionView{ID: st.ID, Holder: st.Holder, TTL: millis(st.TTLMillis), LockDelay: millis(st.LockDelayMillis)}
		for _, g := range st.Grants {
			v.Grants = append(v.Grants, grantRef(g))
		}
		views = append(views, v)
	}
	w.check.CheckSessions(views, w.f.fsm.SessionEnded)
}
