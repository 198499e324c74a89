package coord

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"hash/fnv"
	mrand "math/rand/v2"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fencer-io/fencer/cluster"
	"github.com/fencer-io/fencer/coord/events"
	"github.com/fencer-io/fencer/coord/internal/sim"
	"github.com/fencer-io/fencer/fsm"
	"github.com/fencer-io/fencer/fsm/entry"
	"github.com/fencer-io/fencer/fsm/event"
	"github.com/fencer-io/fencer/fsm/refusal"
)

// The simulation (DESIGN.md, "The simulation") runs the real Service and
// FSM over the fake Raft and a clock that stops at every timer
// (coord/internal/sim), under a seeded random schedule, and holds every
// proposal, entry and step to sim.Invariants. It drives the engine only
// through Service's exported methods and reads the replicated state only
// through fsm.FSM's, so that it outlives refactors of coord's insides.

var (
	simSeed   = flag.Uint64("sim.seed", 0, "the simulation's first seed (0: FENCER_SIM_SEED, else a random one)")
	simSteps  = flag.Int("sim.steps", 0, "steps to simulate (0: 1,000,000, or 50,000 with -short), within -sim.budget")
	simBudget = flag.Duration("sim.budget", 0, "wall time the simulation may take (0: 40s, 5s with -short; unbounded when -sim.steps is set)")
)

// simEpisode is how many steps run over one Service before a fresh one
// (and the next seed) takes over: the fake log and the FSM's request ids
// grow with every step.
const simEpisode = 20_000

func TestSimulation(t *testing.T) {
	seed := *simSeed
	if seed == 0 {
		if env := os.Getenv("FENCER_SIM_SEED"); env != "" {
			v, err := strconv.ParseUint(env, 10, 64)
			if err != nil {
				t.Fatalf("FENCER_SIM_SEED=%q: %v", env, err)
			}
			seed = v
		}
	}
	if seed == 0 {
		var b [8]byte
		_, _ = rand.Read(b[:])
		seed = binary.LittleEndian.Uint64(b[:])>>1 | 1
	}
	steps, budget := *simSteps, *simBudget
	switch {
	case steps > 0 && budget == 0:
		budget = time.Duration(1<<63 - 1)
	case steps == 0 && testing.Short():
		steps = 50_000
	case steps == 0:
		steps = 1_000_000
	}
	if budget == 0 {
		budget = 40 * time.Second
		if testing.Short() {
			budget = 5 * time.Second
		}
	}
	start := time.Now()
	done, episodes := 0, 0
	stats := map[string]int{}
	var lastDigest uint64
	for done < steps && time.Since(start) < budget {
		n := min(simEpisode, steps-done)
		w := newSimWorld(t, seed+uint64(episodes), stats)
		w.run(n, start.Add(budget))
		done += w.step
		episodes++
		lastDigest = w.historyDigest()
	}
	took := time.Since(start)
	if done > 0 && done < simEpisode {
		// One episode or part of one: what a replay compares.
		t.Logf("history digest %x", lastDigest)
	}
	t.Logf("simulated %d steps in %d episodes (seeds %d to %d) in %v: %.0f steps/s", done, episodes, seed, seed+uint64(episodes)-1,
		took.Round(time.Millisecond), float64(done)/took.Seconds())
	t.Logf("counts: %v", stats)
}

// A seed replays the same history: the same entries, in the same order,
// at the same times on the leader's clock, with the same events.
func TestSimulationReplays(t *testing.T) {
	var b [8]byte
	_, _ = rand.Read(b[:])
	seed := binary.LittleEndian.Uint64(b[:])>>1 | 1
	if *simSeed != 0 {
		seed = *simSeed
	}
	var digests [2]uint64
	var entries [2]uint64
	// The first run stops at 5,000 steps or after a minute, whichever comes
	// first (a loaded machine); the second runs exactly as many steps, with
	// no clock to stop it, so the two compare the same episode.
	steps, deadline := 5000, time.Now().Add(time.Minute)
	for i := range digests {
		w := newSimWorld(t, seed, map[string]int{})
		w.run(steps, deadline)
		steps, deadline = w.step, time.Now().Add(24*time.Hour)
		digests[i], entries[i] = w.historyDigest(), w.f.index
	}
	if digests[0] != digests[1] {
		t.Fatalf("seed %d: two runs of %d steps wrote different histories: %d entries, digest %x, then %d, digest %x",
			seed, steps, entries[0], digests[0], entries[1], digests[1])
	}
	t.Logf("seed %d: two runs of %d steps wrote the same %d entries", seed, steps, entries[0])
}

// historyDigest is a hash of every entry applied, its type and its events.
func (w *simWorld) historyDigest() uint64 {
	w.f.mu.Lock()
	defer w.f.mu.Unlock()
	return w.digest
}

// simWorld is one episode: a Service over a fake Raft, its clients, and the
// checker.
type simWorld struct {
	t     *testing.T
	seed  uint64
	rng   *mrand.Rand
	s     *Service
	f     *fakeRaft
	clock *sim.Clock
	check *sim.Checker
	stats map[string]int
	step  int

	locks []string
	sems  []string
	limit map[string]int

	// Guarded by f.mu (the hook and the FSM's observer run under it).
	fault   simFault
	pending entry.Command
	// unanswered: the pending entry's proposer is answered outcome-unknown.
	unanswered bool
	digest     uint64
	faults     [3]int // fired, by kind

	// faulting is set while an operation runs with a fault armed: its
	// answer may be the fault's error.
	faulting bool
	// extraG counts goroutines, the simulation's or the engine's, that
	// may be alive when it is otherwise quiet (a promotion held at its
	// Barrier, a read waiting for it).
	extraG int

	grants   []clientGrant // what clients were answered with (may have ended)
	unknown  []simAsk
	multis   []clientMulti    // what clients were answered with (may have ended)
	sessions []*clientSession // what clients were answered with (may have ended)
	unknownS []SessionRequest // session creates answered outcome-unknown
	waiters  map[int]*simWaiter
	nextID   int
	results  chan simResult
	baseG    int
	leader   bool
	failures []string
}

type simFault int

const (
	noFault          simFault = iota
	faultNotCommited          // the proposal never reaches the log
	faultUnknown              // it is committed, but the leader is answered with an error
)

// clientGrant is a grant a client holds, as it was answered.
type clientGrant struct {
	key     sim.Key
	token   uint64
	secret  string
	session uint64 // the session it lives under (0: none)
}

// simAsk is an acquire as a client made it: answered outcome-unknown, its
// client may retry it with the same request id.
type simAsk struct {
	key          sim.Key
	holder       string
	req          string
	ttl          time.Duration
	session      uint64
	sessionLease string
}

// clientSession is a session a client opened, as it was answered.
type clientSession struct {
	id     uint64
	holder string
	secret string
	delay  time.Duration
	// defaultTaken: a grant under it that asks for no lock-delay of its own
	// has been asked for; later ones ask for their own, so that no two of
	// its grants' lock-delays, started together by its expiry, fall due
	// at one instant.
	defaultTaken bool
}

// simWaiter is an acquire that may queue, running in a goroutine of its own.
type simWaiter struct {
	id     int
	key    sim.Key
	holder string
	req    string
	ttl    time.Duration
	delay  time.Duration
	waitD  time.Duration
	wait   *sim.Wait
	// Under a session: the session, its secret as asked, and the refusal
	// its answer must be (nil: any answer a live session may get).
	session      uint64
	sessionLease string
	want         error
	// multi are a multi-acquire's names (sim_multi_test.go; key is then
	// unused).
	multi []string
}

type simResult struct {
	id     int
	lock   fsm.AcquireResult
	permit fsm.PermitResult
	multi  fsm.MultiResult
	err    error
}

func newSimWorld(t *testing.T, seed uint64, stats map[string]int) *simWorld {
	w := &simWorld{
		t: t, seed: seed, rng: mrand.New(mrand.NewPCG(seed, seed^0x9e3779b97f4a7c15)),
		clock: sim.NewClock(), stats: stats,
		locks: []string{"a", "b", "c"}, sems: []string{"s2", "s3"}, limit: map[string]int{"s2": 2, "s3": 3},
		waiters: map[int]*simWaiter{}, results: make(chan simResult, 64), leader: true,
	}
	limits := map[sim.Key]int{}
	for _, s := range w.sems {
		limits[sim.Key{Kind: sim.Semaphore, Name: s}] = w.limit[s]
	}
	w.check = sim.NewChecker(limits)
	w.baseG = quietGoroutines() + 1 // the Service follows leadership in one goroutine
	w.f = newFakeRaft()
	w.f.hook = w.hook
	w.f.fsm.Observe(simObserver{w})
	w.s = New(w.f, w.f.fsm, Config{Clock: w.clock, Events: events.New(events.Config{}), MaxWaitersPerLock: 3})
	w.s.timers.InOrder()
	w.awaitServing()
	return w
}

// run simulates n steps, or fewer if the wall-clock deadline comes first.
func (w *simWorld) run(n int, deadline time.Time) {
	defer w.close()
	for w.step = 0; w.step < n; w.step++ {
		if w.step%256 == 0 && time.Now().After(deadline) {
			return
		}
		w.check.SetStep(w.step)
		// Every step begins a microsecond after the last, so that timers
		// armed by different steps never fall due at one instant (their
		// lengths are whole milliseconds): two goroutines proposing at
		// once would make the log's order a matter of scheduling.
		w.advance(time.Microsecond)
		op := w.pick()
		w.stats[op.name]++
		op.run(w)
		w.settle(op.name)
		w.checkState()
		w.verdict(op.name)
	}
}

// verdict fails the test, with the command that replays the episode, once
// an invariant or an answer failed.
func (w *simWorld) verdict(op string) {
	fs := append(w.check.Failures(), w.failures...)
	if len(fs) == 0 {
		return
	}
	w.t.Fatalf("simulation failed at step %d (%s) of seed %d:\n  %s\nreplay: go test ./coord/ -run '^TestSimulation$' -count=1 -v -sim.seed=%d -sim.steps=%d",
		w.step, op, w.seed, strings.Join(fs, "\n  "), w.seed, w.step+1)
}

func (w *simWorld) fail(format string, args ...any) {
	w.failures = append(w.failures, fmt.Sprintf("step %d: answers: %s", w.step, fmt.Sprintf(format, args...)))
}

func (w *simWorld) close() {
	w.s.Close()
	w.f.mu.Lock()
	w.stats["fault: not committed"] += w.faults[faultNotCommited]
	w.stats["fault: outcome unknown"] += w.faults[faultUnknown]
	w.f.mu.Unlock()
	for k, v := range w.check.Counts() {
		w.stats["log: "+k] += v
	}
	for len(w.waiters) > 0 {
		select {
		case r := <-w.results:
			w.receive(r)
		case <-time.After(10 * time.Second):
			w.t.Fatalf("seed %d: %d waiters unanswered after Close", w.seed, len(w.waiters))
		}
	}
	// Everything the episode started ends with it: the next one counts
	// goroutines from here.
	for deadline := time.Now().Add(10 * time.Second); runtime.NumGoroutine() > w.baseG-1; runtime.Gosched() {
		if time.Now().After(deadline) {
			w.t.Fatalf("seed %d: %d goroutines left after Close, %d before the Service", w.seed, runtime.NumGoroutine(), w.baseG-1)
		}
	}
}

// quietGoroutines counts goroutines once the count has held still for a
// millisecond (a test before the simulation may leave some ending): the
// simulation's test of quiet counts every goroutine above it as the
// engine's, so a count taken while others were still ending would let it
// move on with the engine busy.
func quietGoroutines() int {
	n, since := runtime.NumGoroutine(), time.Now()
	for deadline := since.Add(time.Second); time.Now().Before(deadline); runtime.Gosched() {
		if m := runtime.NumGoroutine(); m != n {
			n, since = m, time.Now()
		} else if time.Since(since) > time.Millisecond {
			break
		}
	}
	return n
}

// hook is the fake Raft's: every proposal is checked, and the fault armed
// for this step, if any, falls on it.
func (w *simWorld) hook(cmd entry.Command) (bool, error) {
	w.check.Proposed(cmd, w.clock.Now())
	fault := w.fault
	w.fault = noFault
	switch fault {
	case faultNotCommited:
		w.faults[fault]++
		return false, cluster.ErrNotLeader
	case faultUnknown:
		w.faults[fault]++
		w.pending, w.unanswered = cmd, true
		return true, cluster.ErrOutcomeUnknown
	}
	w.pending, w.unanswered = cmd, false
	return true, nil
}

// simObserver hands each applied entry, with the command the hook saw, to
// the checker.
type simObserver struct{ w *simWorld }

func (o simObserver) Applied(index uint64, evs []event.Event) {
	w := o.w
	if w.pending == nil {
		return
	}
	h := fnv.New64a()
	now := w.clock.Now()
	fmt.Fprintf(h, "%d %d %s %d", w.digest, index, w.pending.Type(), now.UnixNano())
	for _, ev := range evs {
		fmt.Fprintf(h, " %s %s%s %d %d", ev.Type, ev.Lock, ev.Semaphore, ev.Token, ev.Session)
	}
	w.digest = h.Sum64()
	w.check.Applied(index, w.pending, evs, now, w.unanswered)
	w.pending, w.unanswered = nil, false
}

func (o simObserver) Restored(uint64, bool, []event.Event) {}

// The operations a step picks from, by weight. Each is one function;
// sessions' are in sim_sessions_test.go. A session's expiry is a clock
// advance like any lease's.
type simOp struct {
	name   string
	weight int
	run    func(w *simWorld)
}

var simOps = []simOp{
	{"acquire", 16, (*simWorld).opAcquire},
	{"acquire with wait", 10, (*simWorld).opAcquireWait},
	{"permit", 10, (*simWorld).opPermit},
	{"permit with wait", 6, (*simWorld).opPermitWait},
	{"release", 14, (*simWorld).opRelease},
	{"renew", 16, (*simWorld).opRenew},
	{"proclaim", 2, (*simWorld).opProclaim},
	{"retry unknown", 2, (*simWorld).opRetryUnknown},
	{"tick", 14, (*simWorld).opTick},
	{"miss renewals", 3, (*simWorld).opMissRenewals},
	{"clock jump", 1, (*simWorld).opClockJump},
	{"failed proposal", 4, (*simWorld).opFault},
	{"leader change", 1, (*simWorld).opLeaderChange},
	{"session create", 8, (*simWorld).opSessionCreate},
	{"session acquire", 8, (*simWorld).opSessionAcquire},
	{"session permit", 5, (*simWorld).opSessionPermit},
	{"session acquire with wait", 5, (*simWorld).opSessionAcquireWait},
	{"session permit with wait", 3, (*simWorld).opSessionPermitWait},
	{"session renew", 12, (*simWorld).opSessionRenew},
	{"session close", 2, (*simWorld).opSessionClose},
	{"session grant release", 3, (*simWorld).opSessionRelease},
	{"session grant renew", 2, (*simWorld).opSessionGrantRenew},
	{"miss session renewals", 2, (*simWorld).opMissSessionRenewals},
	{"wait on a session's name", 6, (*simWorld).opWaitOnSession},
}

var simWeights = func() int {
	n := 0
	for _, op := range simOps {
		n += op.weight
	}
	return n
}()

func (w *simWorld) pick() simOp {
	n := w.rng.IntN(simWeights)
	for _, op := range simOps {
		if n < op.weight {
			return op
		}
		n -= op.weight
	}
	panic("unreachable")
}

func (w *simWorld) holder() string { return "h" + strconv.Itoa(w.rng.IntN(6)) }

func (w *simWorld) requestID() string {
	w.nextID++
	return "req-" + strconv.Itoa(w.nextID)
}

// duration draws a whole number of milliseconds in [lo, hi] that no live
// grant, delay or waiter uses: leases restarted together by a promotion
// then never fall due at one instant.
func (w *simWorld) duration(lo, hi int) time.Duration {
	used := w.check.InUse()
	for _, x := range w.waiters {
		used[x.ttl], used[x.delay] = true, true
	}
	for {
		d := time.Duration(lo+w.rng.IntN(hi-lo+1)) * time.Millisecond
		if !used[d] {
			return d
		}
	}
}

func (w *simWorld) lockDelay() time.Duration {
	if w.rng.IntN(4) == 0 {
		return w.duration(50, 1500)
	}
	return 0
}

func (w *simWorld) opAcquire() {
	key := sim.Key{Kind: sim.Lock, Name: w.locks[w.rng.IntN(len(w.locks))]}
	req := AcquireRequest{Lock: key.Name, Holder: w.holder(), TTL: w.duration(200, 3000), RequestID: w.requestID(), LockDelay: w.lockDelay()}
	if w.rng.IntN(8) == 0 {
		req.Value = "v" + strconv.Itoa(w.rng.IntN(100))
	}
	res, err := w.s.Acquire(bg, req)
	w.acquired(simAsk{key: key, holder: req.Holder, req: req.RequestID, ttl: req.TTL}, res.Grant.Token, res.Grant.Lease, res.Existing, err)
}

func (w *simWorld) opPermit() {
	name := w.sems[w.rng.IntN(len(w.sems))]
	key := sim.Key{Kind: sim.Semaphore, Name: name}
	req := PermitRequest{Semaphore: name, Holder: w.holder(), Limit: w.limit[name], TTL: w.duration(200, 3000), RequestID: w.requestID(), LockDelay: w.lockDelay()}
	res, err := w.s.AcquirePermit(bg, req)
	w.acquired(simAsk{key: key, holder: req.Holder, req: req.RequestID, ttl: req.TTL}, res.Permit.Token, res.Permit.Lease, res.Existing, err)
}

// acquired records an acquire's answer.
func (w *simWorld) acquired(a simAsk, token uint64, secret string, existing bool, err error) {
	switch {
	case err == nil:
		w.grants = append(w.grants, clientGrant{key: a.key, token: token, secret: secret, session: a.session})
		if existing {
			w.check.Restarted(a.key, token, w.clock.Now())
			w.stats["answer: existing grant"]++
		} else {
			w.stats["answer: granted"]++
		}
	case errors.Is(err, cluster.ErrOutcomeUnknown):
		w.unknown = append(w.unknown, a)
		w.stats["answer: outcome unknown"]++
	default:
		w.stats["answer: refused"]++
	}
}

func (w *simWorld) opAcquireWait() {
	key := sim.Key{Kind: sim.Lock, Name: w.locks[w.rng.IntN(len(w.locks))]}
	x := w.waiter(key)
	go func() {
		res, err := w.s.Acquire(bg, AcquireRequest{Lock: key.Name, Holder: x.holder, TTL: x.ttl, Wait: x.waitD, RequestID: x.req, LockDelay: x.delay})
		w.results <- simResult{id: x.id, lock: res, err: err}
	}()
}

func (w *simWorld) opPermitWait() {
	name := w.sems[w.rng.IntN(len(w.sems))]
	key := sim.Key{Kind: sim.Semaphore, Name: name}
	x := w.waiter(key)
	go func() {
		res, err := w.s.AcquirePermit(bg, PermitRequest{Semaphore: name, Holder: x.holder, Limit: w.limit[name], TTL: x.ttl, Wait: x.waitD,
			RequestID: x.req, LockDelay: x.delay})
		w.results <- simResult{id: x.id, permit: res, err: err}
	}()
}

// waiter prepares an acquire that may queue: the checker knows its request
// id before the call, and the clock the length of its wait (whole
// milliseconds and a few nanoseconds, a length no lease timer takes).
func (w *simWorld) waiter(key sim.Key) *simWaiter {
	x := &simWaiter{id: w.nextID + 1, key: key, holder: w.holder(), req: w.requestID(), ttl: w.duration(200, 3000), delay: w.lockDelay()}
	x.waitD = w.duration(50, 4000) + time.Duration(1+x.id%997)*time.Nanosecond
	x.wait = w.clock.Expect(x.waitD)
	w.check.Queued(key, x.req)
	w.check.WaitEnds(x.req, w.clock.Now().Add(x.waitD))
	w.waiters[x.id] = x
	return x
}

// receive records a waiter's answer.
func (w *simWorld) receive(r simResult) {
	x := w.waiters[r.id]
	delete(w.waiters, r.id)
	if notLeading(r.err) {
		w.check.Unserved(x.req)
	}
	if armed, _ := w.clock.WaitArmed(x.wait); !armed {
		w.clock.Unexpect(x.waitD, x.wait)
	}
	if x.multi != nil {
		w.check.AnsweredMulti(x.multi, x.req)
		w.multiAcquired(x.multi, r.multi.Grant.Token, r.multi.Grant.Lease, r.multi.Existing, r.err)
		return
	}
	w.check.Answered(x.key, x.req)
	if x.session != 0 {
		w.sessionAnswered("acquire with wait", x.session, x.want, r.err)
	}
	a := simAsk{key: x.key, holder: x.holder, req: x.req, ttl: x.ttl, session: x.session, sessionLease: x.sessionLease}
	if x.key.Kind == sim.Lock {
		w.acquired(a, r.lock.Grant.Token, r.lock.Grant.Lease, r.lock.Existing, r.err)
	} else {
		w.acquired(a, r.permit.Permit.Token, r.permit.Permit.Lease, r.permit.Existing, r.err)
	}
}

// grant picks a grant a client holds: mostly one the checker believes
// live, sometimes one that may have ended. Ended ones are forgotten.
func (w *simWorld) grant(kind sim.Kind, anyKind bool) (clientGrant, bool, bool) {
	// In token order: the order grants reached the simulation is the
	// scheduler's when several waiters were answered in one step (a
	// session's end serving its names), and a pick by index must not
	// depend on it.
	slices.SortFunc(w.grants, func(a, b clientGrant) int {
		return cmp.Or(cmp.Compare(a.token, b.token), cmp.Compare(a.key.Kind, b.key.Kind), cmp.Compare(a.key.Name, b.key.Name))
	})
	live := w.grants[:0]
	for _, g := range w.grants {
		if _, ok := w.check.Live(g.key, g.token); ok || w.rng.IntN(16) == 0 {
			live = append(live, g)
		}
	}
	w.grants = live
	var pool []clientGrant
	for _, g := range w.grants {
		if anyKind || g.key.Kind == kind {
			pool = append(pool, g)
		}
	}
	if len(pool) == 0 {
		return clientGrant{}, false, false
	}
	g := pool[w.rng.IntN(len(pool))]
	_, isLive := w.check.Live(g.key, g.token)
	return g, isLive, true
}

func (w *simWorld) opRelease() {
	g, live, ok := w.grant(0, true)
	if !ok {
		return
	}
	var err error
	if g.key.Kind == sim.Lock {
		err = w.s.Release(bg, g.key.Name, g.token, g.secret)
	} else {
		err = w.s.ReleasePermit(bg, g.key.Name, g.token, g.secret)
	}
	w.answered("release", g, live, err)
}

func (w *simWorld) opRenew() {
	g, live, ok := w.grant(0, true)
	if !ok {
		return
	}
	if g.session != 0 {
		w.renewUnderSession(g, live)
		return
	}
	var err error
	if g.key.Kind == sim.Lock {
		_, err = w.s.Renew(bg, g.key.Name, g.token, g.secret)
	} else {
		_, err = w.s.RenewPermit(bg, g.key.Name, g.token, g.secret)
	}
	if err == nil {
		w.check.Restarted(g.key, g.token, w.clock.Now())
	}
	w.answered("renew", g, live, err)
}

func (w *simWorld) opProclaim() {
	g, live, ok := w.grant(sim.Lock, false)
	if !ok {
		return
	}
	_, err := w.s.Proclaim(bg, g.key.Name, g.token, g.secret, "v"+strconv.Itoa(w.rng.IntN(100)))
	w.answered("proclaim", g, live, err)
}

// answered holds a release, renewal or proclamation of a client's grant to
// what it must answer: done when the grant is live (and no fault was
// armed), refused as a lost lease when it has ended.
func (w *simWorld) answered(what string, g clientGrant, live bool, err error) {
	// An armed fault answers the proposal it falls on with its own error.
	faulted := w.faulting && (errors.Is(err, cluster.ErrNotLeader) || errors.Is(err, cluster.ErrOutcomeUnknown))
	switch {
	case faulted:
	case err == nil && !live:
		w.fail("%s of %s's ended grant %d succeeded", what, g.key, g.token)
	case err != nil && live:
		w.fail("%s of %s's live grant %d: %v", what, g.key, g.token, err)
	case err != nil && !live && !errors.Is(err, refusal.ErrLeaseLost):
		w.fail("%s of %s's ended grant %d: %v, not a lost lease", what, g.key, g.token, err)
	}
	if err == nil {
		w.stats[what+": done"]++
	} else {
		w.stats[what+": refused"]++
	}
}

func (w *simWorld) opRetryUnknown() {
	if len(w.unknownS) > 0 && (len(w.unknown) == 0 || w.rng.IntN(4) == 0) {
		w.retrySessionCreate()
		return
	}
	if len(w.unknown) == 0 {
		return
	}
	slices.SortFunc(w.unknown, func(a, b simAsk) int { return strings.Compare(a.req, b.req) }) // arrived in any order
	i := w.rng.IntN(len(w.unknown))
	u := w.unknown[i]
	w.unknown = append(w.unknown[:i], w.unknown[i+1:]...)
	if u.key.Kind == sim.Lock {
		res, err := w.s.Acquire(bg, AcquireRequest{Lock: u.key.Name, Holder: u.holder, TTL: u.ttl, RequestID: u.req,
			Session: u.session, SessionLease: u.sessionLease})
		w.acquired(u, res.Grant.Token, res.Grant.Lease, res.Existing, err)
	} else {
		res, err := w.s.AcquirePermit(bg, PermitRequest{Semaphore: u.key.Name, Holder: u.holder, Limit: w.limit[u.key.Name], TTL: u.ttl, RequestID: u.req,
			Session: u.session, SessionLease: u.sessionLease})
		w.acquired(u, res.Permit.Token, res.Permit.Lease, res.Existing, err)
	}
}

func (w *simWorld) opTick() { w.advance(time.Duration(1+w.rng.IntN(300)) * time.Millisecond) }

// opMissRenewals moves time past most TTLs.
func (w *simWorld) opMissRenewals() {
	w.advance(time.Duration(1000+w.rng.IntN(3000)) * time.Millisecond)
}

func (w *simWorld) opClockJump() {
	w.advance(time.Duration(10+w.rng.IntN(50)) * time.Second)
}

// opFault arms a failed proposal (never committed, or committed with an
// unknown outcome) and runs an operation that proposes.
func (w *simWorld) opFault() {
	f := faultNotCommited
	if w.rng.IntN(2) == 0 {
		f = faultUnknown
	}
	w.f.mu.Lock()
	w.fault = f
	w.f.mu.Unlock()
	w.faulting = true
	defer func() {
		w.f.mu.Lock()
		w.fault = noFault
		w.f.mu.Unlock()
		w.faulting = false
	}()
	ops := []func(){w.opAcquire, w.opPermit, w.opRelease, w.opTick, w.opMissRenewals, w.opAcquireWait,
		w.opSessionCreate, w.opSessionAcquire, w.opSessionPermit, w.opSessionClose, w.opMissSessionRenewals}
	ops[w.rng.IntN(len(ops))]()
	w.settle("failed proposal")
}

// opLeaderChange ends the leader's view: either it is demoted (a follower
// answers not-leader and times nothing) and then promoted again after a
// Barrier that the test holds while time passes, or a new term begins at
// once. Either way every waiter is answered and, once promoted, every lease
// and delay restarts at its full length.
func (w *simWorld) opLeaderChange() {
	if w.rng.IntN(3) == 0 {
		w.f.setLeader(true)
		w.stats["leader: new term"]++
		w.awaitServing()
		return
	}
	w.stats["leader: demoted"]++
	w.f.setLeader(false)
	w.leader = false
	w.settle("demote")
	// A follower times nothing: its lease timer and every waiter's are
	// stopped.
	for deadline := time.Now().Add(10 * time.Second); w.clock.Pending() != 0; runtime.Gosched() {
		if time.Now().After(deadline) {
			w.fail("a demoted leader still has %d timers", w.clock.Pending())
			return
		}
	}
	if _, err := w.s.Acquire(bg, AcquireRequest{Lock: "a", Holder: "h0", TTL: time.Second}); !errors.Is(err, cluster.ErrNotLeader) {
		w.fail("an acquire on a follower: %v, not ErrNotLeader", err)
	}
	w.advance(time.Duration(w.rng.IntN(5000)) * time.Millisecond)
	gate := make(chan struct{})
	w.f.mu.Lock()
	w.f.barrier = gate
	w.f.mu.Unlock()
	w.f.setLeader(true)
	// A request made before the new leader's Barrier returns is served
	// after it; meanwhile time passes and nothing is timed.
	early := make(chan error, 1)
	go func() {
		// Short tries (see awaitServing), each refused not-ready until
		// the promotion.
		for {
			ctx, cancel := context.WithTimeout(bg, 200*time.Microsecond)
			_, err := w.s.Lock(ctx, "a", false)
			cancel()
			if !errors.Is(err, cluster.ErrNoLeader) {
				early <- err
				return
			}
		}
	}()
	w.extraG = 2 // the read, and the promotion held at the Barrier
	w.advance(time.Duration(w.rng.IntN(2000)) * time.Millisecond)
	if n := w.clock.Pending(); n != 0 {
		w.fail("a leader waiting for its Barrier has %d timers", n)
	}
	select {
	case err := <-early:
		w.fail("a read made while the new leader waited for its Barrier was answered before it: %v", err)
	default:
	}
	close(gate)
	w.f.mu.Lock()
	w.f.barrier = nil
	w.f.mu.Unlock()
	if err := <-early; err != nil {
		w.fail("a read made while the new leader waited for its Barrier: %v", err)
	}
	w.extraG = 0
	w.awaitServing()
}

// awaitServing waits until the service serves in the current view, and
// tells the checker when its leases restarted.
func (w *simWorld) awaitServing() {
	// Each try is short: a read that finds the last view promoted, before
	// the Service has seen the new one begin, waits 50 ms to look again.
	for deadline := time.Now().Add(10 * time.Second); ; {
		ctx, cancel := context.WithTimeout(bg, 200*time.Microsecond)
		_, err := w.s.Lock(ctx, "a", false)
		cancel()
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			w.t.Fatalf("seed %d step %d: the service did not serve: %v", w.seed, w.step, err)
		}
	}
	w.leader = true
	w.check.Promoted(w.clock.Now())
}

// advance moves the clock by d, stopping at each instant a timer is due
// to let what it set going finish.
func (w *simWorld) advance(d time.Duration) {
	target := w.clock.Now().Add(d)
	for {
		fired, reached := w.clock.Step(target)
		if fired > 1 {
			w.stats["timers due together"]++
		}
		w.settle("advance")
		if reached {
			return
		}
	}
}

// settle waits until the engine is quiet: every waiter's goroutine has
// either returned or sits in its queue with its wait's timer armed and not
// yet fired, and no goroutine of the engine is left running (an expiry
// the lease timers started, a promotion). Only then may the clock move or
// the next step begin, so that a seed replays the same history.
func (w *simWorld) settle(what string) {
	deadline := time.Now().Add(10 * time.Second)
	for spins := 0; ; spins++ {
		for drained := true; drained; {
			select {
			case r := <-w.results:
				w.receive(r)
			default:
				drained = false
			}
		}
		why := w.busy()
		if why == "" {
			return
		}
		if spins > 64 && time.Now().After(deadline) {
			w.t.Fatalf("seed %d step %d: the engine did not settle after %s: %s\nreplay: go test ./coord/ -run '^TestSimulation$' -count=1 -v -sim.seed=%d -sim.steps=%d",
				w.seed, w.step, what, why, w.seed, w.step+1)
		}
		runtime.Gosched()
	}
}

// busy says why the engine is not quiet yet, or "".
func (w *simWorld) busy() string {
	queued := map[sim.Key]int{}
	for _, x := range w.waiters {
		armed, fired := w.clock.WaitArmed(x.wait)
		if !armed {
			return fmt.Sprintf("waiter %d (%s) has not armed its wait", x.id, x.key)
		}
		if fired {
			return fmt.Sprintf("waiter %d (%s): its wait ended, no answer yet", x.id, x.key)
		}
		if x.multi == nil {
			queued[x.key]++
		}
		for _, n := range x.multi {
			queued[sim.Key{Kind: sim.Lock, Name: n}]++
		}
	}
	for _, name := range w.locks {
		k := sim.Key{Kind: sim.Lock, Name: name}
		st, _ := w.s.Lock(bg, name, true)
		if st.Waiters != queued[k] {
			return fmt.Sprintf("%s has %d waiters queued, %d of the simulation's are waiting", k, st.Waiters, queued[k])
		}
	}
	for _, name := range w.sems {
		k := sim.Key{Kind: sim.Semaphore, Name: name}
		st, _ := w.s.Semaphore(bg, name, true)
		if st.Waiters != queued[k] {
			return fmt.Sprintf("%s has %d waiters queued, %d of the simulation's are waiting", k, st.Waiters, queued[k])
		}
	}
	if n := w.s.timers.Firing(); n > 0 {
		// Counted on its own: a goroutine the count below expects may
		// have ended while an expiry's still runs, and then the expiry
		// landed in a later step, or not at all, by the schedule.
		return fmt.Sprintf("%d timers are firing", n)
	}
	if n, want := runtime.NumGoroutine(), w.baseG+len(w.waiters)+w.extraG; n > want {
		return fmt.Sprintf("%d goroutines running, %d expected", n, want)
	}
	return ""
}

// checkState compares the FSM's state of every name with the checker's.
func (w *simWorld) checkState() {
	for _, name := range w.locks {
		var tokens, delays []uint64
		if l, held := w.f.fsm.Lock(name); held {
			tokens = append(tokens, l.Token)
		}
		if d, ok := w.f.fsm.Delay(name); ok {
			delays = append(delays, d.Since)
		}
		w.check.State(sim.Key{Kind: sim.Lock, Name: name}, tokens, delays)
	}
	for _, name := range w.sems {
		var tokens, delays []uint64
		st := w.f.fsm.Semaphore(name)
		for _, p := range st.Permits {
			tokens = append(tokens, p.Token)
		}
		for _, d := range st.Delays {
			delays = append(delays, d.Since)
		}
		w.check.State(sim.Key{Kind: sim.Semaphore, Name: name}, tokens, delays)
	}
	w.checkSessions()
	w.check.Settled()
}
