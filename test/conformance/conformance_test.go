package conformance

// TestConformance/<client>/<scenario> runs PROTOCOL.md's scenarios against
// every client through its agent. Each scenario was seen to fail once with
// the Go client (or its agent) broken as this table says, by hand, then
// undone:
//
//	scenario                          break                                                  how it failed
//	acquire_release                   goagent's release answers {} without Release           the lock still held after the release
//	fenced_write                      goagent's put writes value+"!"                         the harness reads "v1!"
//	stale_write_refused               client: stale_token left out of codeErrors             class "error", the base, not ErrStaleToken
//	wait_out_crashed_holder           client: Wait(d) sets no wait                           agent 2 refused at once, never queued
//	lease_lost_during_pause           client: keeper.checkDeadline does nothing              lease_state says held on the first look
//	leader_killed_during_hold         client: one attempt per request, and a failed          a lost event (unavailable) during the hold
//	                                  renewal ends the lease
//	watch_resumed_across_dead_member  client: a reconnect sends Last-Event-ID = since        k1..k3 delivered twice
//	deadline_from_send_time           client: a lease counted from the grant's arrival       lost 3.5 s after the send, over TTL 3 s
//	error_codes                       client: semaphore_full left out of codeErrors          semaphore_full's class is the base "error"
//	sessions_and_primitives           client: Session.Close never sends the close            every grant under it still held
//
// The harness believes no agent's word alone: every outcome is read back
// with its own Go client (api/client), straight from the members.

import (
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/fencer-io/fencer/api/client"
	"github.com/fencer-io/fencer/api/wire"
)

// clientSpec is one client under test: its agent's wrapper (relative to the
// repository; empty for the Go agent, which the harness builds) and the
// name of its base error, which no code of its own may come back as.
type clientSpec struct {
	name    string
	wrapper string
	base    string
}

var clientSpecs = []clientSpec{
	{name: "go", base: "error"},
	{name: "python", wrapper: "clients/python/conformance-agent", base: "FencerError"},
	{name: "python-aio", wrapper: "clients/python/conformance-agent-aio", base: "FencerError"},
	{name: "typescript", wrapper: "clients/typescript/conformance-agent", base: "FencerError"},
	{name: "java", wrapper: "clients/java/conformance-agent", base: "FencerException"},
}

// scenarios are PROTOCOL.md's, in its order.
var scenarios = []struct {
	name string
	run  func(*testing.T, *env)
}{
	{"acquire_release", acquireRelease},
	{"fenced_write", fencedWrite},
	{"stale_write_refused", staleWriteRefused},
	{"wait_out_crashed_holder", waitOutCrashedHolder},
	{"lease_lost_during_pause", leaseLostDuringPause},
	{"leader_killed_during_hold", leaderKilledDuringHold},
	{"watch_resumed_across_dead_member", watchResumedAcrossDeadMember},
	{"deadline_from_send_time", deadlineFromSendTime},
	{"error_codes", errorCodes},
	{"sessions_and_primitives", sessionsAndPrimitives},
}

func TestConformance(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	for _, spec := range clientSpecs {
		t.Run(spec.name, func(t *testing.T) {
			if spec.wrapper != "" {
				if _, err := os.Stat(filepath.Join(root, spec.wrapper)); err != nil {
					notBuilt(t, fmt.Errorf("%w: no wrapper %s", errNotBuilt, spec.wrapper))
				}
			}
			argv := spec.argv(t, root)
			probe(t, argv)
			start := time.Now()
			e := newEnv(t, spec, argv)
			for _, sc := range scenarios {
				t.Run(sc.name, func(t *testing.T) {
					e.heal(t)
					sc.run(t, e)
				})
			}
			t.Logf("%s: cluster and %d scenarios in %v", spec.name, len(scenarios), time.Since(start).Round(100*time.Millisecond))
		})
	}
}

// notBuilt skips a client that is not built, or fails it when
// FENCER_REQUIRE_CLIENTS=1 (make test).
func notBuilt(t *testing.T, err error) {
	t.Helper()
	if os.Getenv("FENCER_REQUIRE_CLIENTS") == "1" {
		t.Fatal(err)
	}
	t.Skip(err)
}

// ttlMs is the lease a scenario asks for unless time is its subject.
const ttlMs = 5000

// acquireRelease: the lock shows the agent's grant, then is free.
func acquireRelease(t *testing.T, e *env) {
	a := e.agent(t)
	name := e.name(t, "lock")
	r := a.ok(t, "acquire", map[string]any{"name": name, "holder": "agent-a", "ttl_ms": ttlMs})
	token := r.u64(t, "token")
	if got := r.u64(t, "ttl_ms"); got != ttlMs {
		t.Errorf("ttl_ms %d, want %d", got, ttlMs)
	}
	st, err := e.hc.Lock(ctx(t), name)
	if err != nil || !st.Held || st.Holder != "agent-a" || st.Token != token {
		t.Fatalf("lock after acquire: %+v, %v; want held by agent-a with token %d", st, err, token)
	}
	a.ok(t, "release", map[string]any{"handle": r.str(t, "handle")})
	if st, err := e.hc.Lock(ctx(t), name); err != nil || st.Held {
		t.Fatalf("lock after release: %+v, %v; want free", st, err)
	}
}

// fencedWrite: a write with the token and the lock is stored with it.
func fencedWrite(t *testing.T, e *env) {
	a := e.agent(t)
	name, key := e.name(t, "lock"), e.name(t, "key")
	r := a.ok(t, "acquire", map[string]any{"name": name, "holder": "agent-a", "ttl_ms": ttlMs})
	token := r.u64(t, "token")
	if got := a.ok(t, "put", map[string]any{"key": key, "value": "v1", "token": token, "lock": name}).u64(t, "token"); got != token {
		t.Errorf("put answered token %d, want %d", got, token)
	}
	v, vt, err := e.hc.Get(ctx(t), key)
	if err != nil || string(v) != "v1" || vt != token {
		t.Fatalf("the harness reads %q with token %d (%v); want v1 with %d", v, vt, err, token)
	}
	g := a.ok(t, "get", map[string]any{"key": key})
	if g.str(t, "value") != "v1" || g.u64(t, "token") != token {
		t.Fatalf("the agent reads %v; want v1 with token %d", g, token)
	}
}

// staleWriteRefused: a released holder's late write is refused as stale.
func staleWriteRefused(t *testing.T, e *env) {
	a := e.agent(t)
	name, key := e.name(t, "lock"), e.name(t, "key")
	r1 := a.ok(t, "acquire", map[string]any{"name": name, "holder": "agent-a", "ttl_ms": ttlMs})
	t1 := r1.u64(t, "token")
	a.ok(t, "release", map[string]any{"handle": r1.str(t, "handle")})
	r2 := a.ok(t, "acquire", map[string]any{"name": name, "holder": "agent-b", "ttl_ms": ttlMs})
	t2 := r2.u64(t, "token")
	if t2 <= t1 {
		t.Fatalf("B's token %d is not above A's %d", t2, t1)
	}
	a.ok(t, "put", map[string]any{"key": key, "value": "B", "token": t2})
	err := a.fail(t, "put", map[string]any{"key": key, "value": "A", "token": t1})
	e.wantCode(t, err, wire.CodeStaleToken)
	if v, vt, gerr := e.hc.Get(ctx(t), key); gerr != nil || string(v) != "B" || vt != t2 {
		t.Fatalf("the key holds %q with token %d (%v); want B's write, token %d", v, vt, gerr, t2)
	}
}

// crashBound is how long past the TTL a waiter may take to be granted a
// crashed holder's lock: the leader's expiry timer, the hand-off's commit,
// the answer, on a loaded machine.
const crashBound = 4 * time.Second

// waitOutCrashedHolder: a SIGKILLed holder's lock goes to the waiter once
// its lease runs out, with a greater token.
func waitOutCrashedHolder(t *testing.T, e *env) {
	const ttl = 2 * time.Second
	name := e.name(t, "lock")
	a1, a2 := e.agent(t), e.agent(t)
	t1 := a1.ok(t, "acquire", map[string]any{"name": name, "holder": "agent-1", "ttl_ms": ttl.Milliseconds()}).u64(t, "token")
	waiting := a2.send(t, "acquire", map[string]any{"name": name, "holder": "agent-2", "ttl_ms": ttlMs, "wait_ms": 30000})
	poll(t, 20*time.Second, "agent 2's acquire queued", func() bool {
		st, err := e.hc.Lock(ctx(t), name)
		return err == nil && st.Waiters > 0
	})
	killed := time.Now()
	a1.kill()
	r := waiting.ok(t)
	took := time.Since(killed)
	t2 := r.u64(t, "token")
	if t2 <= t1 {
		t.Fatalf("agent 2's token %d is not above the crashed holder's %d", t2, t1)
	}
	if took > ttl+crashBound {
		t.Fatalf("agent 2 granted %v after the kill, over TTL %v + %v", took, ttl, crashBound)
	}
	st, err := e.hc.Lock(ctx(t), name)
	if err != nil || st.Holder != "agent-2" || st.Token != t2 {
		t.Fatalf("lock: %+v, %v; want agent-2's grant %d", st, err, t2)
	}
	t.Logf("granted %v after the kill (TTL %v)", took.Round(10*time.Millisecond), ttl)
}

// leaseLostDuringPause: a holder paused past its TTL sees the loss on its
// first look, gets its lost event, and its late write is refused.
func leaseLostDuringPause(t *testing.T, e *env) {
	const ttl = 2 * time.Second
	a := e.agent(t)
	name, key := e.name(t, "lock"), e.name(t, "key")
	acquire := a.send(t, "acquire", map[string]any{"name": name, "holder": "agent-a", "ttl_ms": ttl.Milliseconds()})
	r := acquire.ok(t)
	t1, handle := r.u64(t, "token"), r.str(t, "handle")
	if err := a.signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	// The harness's acquire is granted once the server expired the
	// paused holder's lease, a TTL or more after the pause began.
	l, err := e.hc.Acquire(ctx(t), name, client.Holder("harness"), client.TTL(ttlMs*time.Millisecond), client.Wait(20*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release(ctx(t))
	if err := e.hc.PutFenced(ctx(t), key, []byte("harness"), l.Token()); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(acquire.sentAt); d < ttl {
		t.Fatalf("the harness was granted the lock %v after the paused holder's acquire was sent, within its TTL", d)
	}
	if err := a.signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	if st := a.ok(t, "lease_state", map[string]any{"handle": handle}); !st.boolean(t, "lost") {
		t.Fatalf("lease_state on the first look after the pause: %v, want lost", st)
	}
	ev := a.waitEvent(t, 10*time.Second, "lost event", lostOf(handle))
	if ev.Code != wire.CodeLeaseLost {
		t.Errorf("lost event code %q, want lease_lost", ev.Code)
	}
	e.wantCode(t, a.fail(t, "put", map[string]any{"key": key, "value": "agent", "token": t1}), wire.CodeStaleToken)
	if v, vt, err := e.hc.Get(ctx(t), key); err != nil || string(v) != "harness" || vt != l.Token() {
		t.Fatalf("the key holds %q with token %d (%v); want the harness's write", v, vt, err)
	}
}

// leaderKilledDuringHold: a hold outlives the leader: renewed through the
// new one, never lost, still current. The TTL leaves the election 5.4 s
// (the local deadline after a kill just after the grant): on a loaded
// 2-core machine the test cluster's elections took up to 3 s.
func leaderKilledDuringHold(t *testing.T, e *env) {
	const ttl = 6 * time.Second
	a := e.agent(t)
	name := e.name(t, "lock")
	r := a.ok(t, "acquire", map[string]any{"name": name, "holder": "agent-a", "ttl_ms": ttl.Milliseconds()})
	token, handle := r.u64(t, "token"), r.str(t, "handle")
	old := e.c.WaitLeader(10 * time.Second)
	killed := time.Now()
	e.c.Stop(old)
	e.c.WaitNewLeader(old.ID, 30*time.Second)
	t.Logf("a new leader %v after the kill", time.Since(killed).Round(10*time.Millisecond))
	a.noEvent(t, 2*ttl, lostOf(handle))
	if chk, err := e.hc.Check(ctx(t), name, token); err != nil || !chk.Current {
		t.Fatalf("check after two TTLs under the new leader: %+v, %v; want current", chk, err)
	}
	if st := a.ok(t, "lease_state", map[string]any{"handle": handle}); st.boolean(t, "lost") {
		t.Fatalf("lease_state: %v, want held", st)
	}
	a.ok(t, "release", map[string]any{"handle": handle})
	if st, err := e.hc.Lock(ctx(t), name); err != nil || st.Held {
		t.Fatalf("lock after release: %+v, %v; want free", st, err)
	}
}

// watchResumedAcrossDeadMember: a watch whose member dies resumes at
// another from the last event it delivered: each write's event once, in
// order, none missing.
func watchResumedAcrossDeadMember(t *testing.T, e *env) {
	a := e.agent(t)
	prefix := e.name(t, "w") + "."
	_, from, err := e.hc.LocksAt(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	w := a.ok(t, "watch", map[string]any{"from": from, "prefix": prefix}).str(t, "watch")
	l, err := e.hc.Acquire(ctx(t), prefix+"lock", client.Holder("harness"), client.TTL(ttlMs*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release(ctx(t))
	var keys []string
	write := func(n int) {
		for range n {
			k := fmt.Sprintf("%sk%d", prefix, len(keys)+1)
			if err := e.hc.PutFenced(ctx(t), k, []byte("v"), l.Token()); err != nil {
				t.Fatal(err)
			}
			keys = append(keys, k)
		}
	}
	puts := func() []event {
		return a.snapshot(func(ev event) bool { return ev.Event == "watch" && ev.Watch == w && ev.Type == wire.EventPut })
	}
	write(3)
	a.waitEvent(t, 20*time.Second, "the third put's event", func(ev event) bool { return ev.Event == "watch" && ev.Key == keys[2] })
	var carrier *Proxy
	poll(t, 10*time.Second, "a proxy carrying the watch", func() bool {
		for _, p := range e.proxies {
			if _, watches := p.Open(); watches > 0 {
				carrier = p
				return true
			}
		}
		return false
	})
	carrier.Dead()
	write(3)
	poll(t, 30*time.Second, "six put events", func() bool { return len(puts()) >= len(keys) })
	got := puts()
	for i, ev := range got {
		if i >= len(keys) || ev.Key != keys[i] {
			t.Fatalf("put events %+v; want one for each of %v, in order", got, keys)
		}
	}
	all := a.snapshot(func(ev event) bool { return ev.Watch == w })
	for i, ev := range all {
		if ev.Event != "watch" {
			t.Fatalf("watch ended: %+v", ev)
		}
		if i > 0 && ev.Index <= all[i-1].Index {
			t.Fatalf("event %d's index %d not above the last one's %d: %+v", i, ev.Index, all[i-1].Index, all)
		}
		if ev.Index <= from {
			t.Fatalf("event at %d, not after the watch's from %d", ev.Index, from)
		}
	}
}

// deadlineFromSendTime: a client counts its lease from when it sent the
// acquire, not from when the (delayed) answer arrived.
func deadlineFromSendTime(t *testing.T, e *env) {
	const ttl = 3 * time.Second
	const delay = 800 * time.Millisecond
	a := e.agent(t)
	name := e.name(t, "lock")
	// A warm-up grant first, so that the client knows the leader: the
	// acquire below is then sent as the harness writes it, not after a
	// (delayed) leader lookup that would count against the client.
	warm := a.ok(t, "acquire", map[string]any{"name": name + ".warm", "holder": "agent-a", "ttl_ms": ttlMs})
	a.ok(t, "release", map[string]any{"handle": warm.str(t, "handle")})
	for _, p := range e.proxies {
		p.DelayAnswers(delay)
	}
	acquire := a.send(t, "acquire", map[string]any{"name": name, "holder": "agent-a", "ttl_ms": ttl.Milliseconds()})
	r := acquire.ok(t)
	answered := time.Since(acquire.sentAt)
	for _, p := range e.proxies {
		p.Blackhole()
	}
	handle := r.str(t, "handle")
	ev := a.waitEvent(t, 20*time.Second, "lost event", lostOf(handle))
	lostAfter := ev.At.Sub(acquire.sentAt)
	t.Logf("answered %v, lost %v after the acquire was written", answered.Round(10*time.Millisecond), lostAfter.Round(10*time.Millisecond))
	if lostAfter > ttl {
		t.Fatalf("lost %v after the acquire was sent, over its TTL %v: the lease was counted from a later time than the send", lostAfter, ttl)
	}
	if ev.Code != wire.CodeLeaseLost {
		t.Errorf("lost event code %q, want lease_lost", ev.Code)
	}
}

// noEvent waits d and fails if an event matching match arrives meanwhile:
// the scenario is about an absence over that time.
func (a *agentProc) noEvent(t *testing.T, d time.Duration, match func(event) bool) {
	t.Helper()
	end := time.After(d)
	for {
		if evs := a.snapshot(match); len(evs) > 0 {
			t.Fatalf("unexpected event: %+v", evs[0])
		}
		a.mu.Lock()
		changed := a.changed
		a.mu.Unlock()
		select {
		case <-changed:
		case <-end:
			if evs := a.snapshot(match); len(evs) > 0 {
				t.Fatalf("unexpected event: %+v", evs[0])
			}
			return
		}
	}
}

// wantCode fails unless err carries code and a typed class of its own.
func (e *env) wantCode(t *testing.T, err agentError, code string) {
	t.Helper()
	if err.Code != code {
		t.Errorf("code %q (class %s: %s), want %s", err.Code, err.Class, err.Message, code)
		return
	}
	if err.Class == "" || err.Class == e.spec.base {
		t.Errorf("%s: class %q, want a typed error of its own, not the client's base %s", code, err.Class, e.spec.base)
	}
}

// errorCodes provokes each code a client can meet through the agent.
func errorCodes(t *testing.T, e *env) {
	a := e.agent(t)
	c := ctx(t)
	agentLock := func(name string, more ...any) result {
		args := map[string]any{"name": name, "holder": "agent-a", "ttl_ms": ttlMs}
		for i := 0; i+1 < len(more); i += 2 {
			args[more[i].(string)] = more[i+1]
		}
		return a.ok(t, "acquire", args)
	}
	check := func(code string, op string, args map[string]any) {
		t.Helper()
		t.Run(code, func(t *testing.T) { e.wantCode(t, a.fail(t, op, args), code) })
	}

	held := e.name(t, "held")
	hl, err := e.hc.Acquire(c, held, client.Holder("harness"), client.TTL(30*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer hl.Release(ctx(t))
	check(wire.CodeLockHeld, "acquire", map[string]any{"name": held, "holder": "agent-a", "ttl_ms": ttlMs})

	delayed := e.name(t, "delayed")
	if _, err := e.hc.Acquire(c, delayed, client.Holder("harness"), client.TTL(200*time.Millisecond), client.LockDelay(30*time.Second), client.NoKeepAlive()); err != nil {
		t.Fatal(err)
	}
	poll(t, 10*time.Second, "the lock-delay running", func() bool {
		st, err := e.hc.Lock(c, delayed)
		return err == nil && !st.Held && st.DelayRemainingMillis != nil
	})
	check(wire.CodeLockDelay, "acquire", map[string]any{"name": delayed, "holder": "agent-a", "ttl_ms": ttlMs})

	mine := e.name(t, "mine")
	ta := agentLock(mine).u64(t, "token")
	stale := e.name(t, "key")
	later, err := e.hc.Acquire(c, e.name(t, "later"), client.Holder("harness"), client.TTL(30*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer later.Release(ctx(t))
	if err := e.hc.PutFenced(c, stale, []byte("harness"), later.Token()); err != nil {
		t.Fatal(err)
	}
	check(wire.CodeStaleToken, "put", map[string]any{"key": stale, "value": "agent", "token": ta})
	check(wire.CodeNotLockHolder, "put", map[string]any{"key": e.name(t, "key"), "value": "agent", "token": ta, "lock": held})

	election := e.name(t, "election")
	hc := a.ok(t, "campaign", map[string]any{"name": election, "holder": "agent-a", "value": "v1", "ttl_ms": ttlMs, "wait_ms": 20000}).str(t, "handle")
	a.ok(t, "release", map[string]any{"handle": hc})
	check(wire.CodeLeaseLost, "proclaim", map[string]any{"handle": hc, "value": "v2"})

	revoked := e.name(t, "revoked")
	rr := agentLock(revoked)
	if _, err := e.hc.RevokeLock(c, revoked, rr.u64(t, "token")); err != nil {
		t.Fatal(err)
	}
	t.Run(wire.CodeRevoked, func(t *testing.T) {
		// No op answers revoked (a revoked grant's proclaim finds it
		// gone: lease_lost): the loss itself carries the code.
		// Its class is optional in the event; checked when given.
		ev := a.waitEvent(t, 20*time.Second, "the revoked grant's lost event", lostOf(rr.str(t, "handle")))
		if ev.Class == "" {
			ev.Class = "(none given)"
		}
		e.wantCode(t, agentError{Code: ev.Code, Class: ev.Class, Message: "lost event"}, wire.CodeRevoked)
	})

	sem := e.name(t, "sem")
	a.ok(t, "sem_acquire", map[string]any{"name": sem, "limit": 1, "holder": "agent-a", "ttl_ms": ttlMs})
	check(wire.CodeSemaphoreFull, "sem_acquire", map[string]any{"name": sem, "limit": 1, "holder": "agent-b", "ttl_ms": ttlMs})
	check(wire.CodeLimitMismatch, "sem_acquire", map[string]any{"name": sem, "limit": 2, "holder": "agent-b", "ttl_ms": ttlMs})

	m1, m2 := e.name(t, "m"), e.name(t, "m")
	hm := a.ok(t, "multi_acquire", map[string]any{"names": []string{m1, m2}, "holder": "agent-a", "ttl_ms": ttlMs}).str(t, "handle")
	check(wire.CodeMultiGrant, "release", map[string]any{"handle": hm, "name": m1})
	check(wire.CodeInvalidNames, "multi_acquire", map[string]any{"names": []string{m1, m1}, "holder": "agent-a", "ttl_ms": ttlMs})

	check(wire.CodeInvalidName, "acquire", map[string]any{"name": "bad!name", "holder": "agent-a", "ttl_ms": ttlMs})
	check(wire.CodeInvalidTTL, "acquire", map[string]any{"name": e.name(t, "lock"), "holder": "agent-a", "ttl_ms": 50})
	check(wire.CodeInvalidMode, "acquire", map[string]any{"name": e.name(t, "lock"), "holder": "agent-a", "ttl_ms": ttlMs, "mode": "bogus"})

	check(wire.CodeUnknownSession, "revoke", map[string]any{"kind": "session", "name": "999999999"})
	s := a.ok(t, "session_open", map[string]any{"holder": "agent-a", "ttl_ms": ttlMs})
	a.ok(t, "session_close", map[string]any{"session": s.str(t, "session")})
	check(wire.CodeSessionExpired, "revoke", map[string]any{"kind": "session", "name": fmt.Sprint(s.u64(t, "id"))})

	check(wire.CodeNotFound, "leader", map[string]any{"name": e.name(t, "nobody")})
	t.Run("not_found_key", func(t *testing.T) {
		e.wantCode(t, a.fail(t, "get", map[string]any{"key": e.name(t, "missing")}), wire.CodeNotFound)
	})
	check(wire.CodeUnknownToken, "token_info", map[string]any{"token": uint64(1) << 50})
}

// sessionsAndPrimitives: every primitive under one session, all ended by
// its close; a multi-lock's names share one token.
func sessionsAndPrimitives(t *testing.T, e *env) {
	a := e.agent(t)
	c := ctx(t)
	s := a.ok(t, "session_open", map[string]any{"holder": "agent-a", "ttl_ms": ttlMs})
	sh, id := s.str(t, "session"), s.u64(t, "id")
	lock, shared, sem, election := e.name(t, "lock"), e.name(t, "shared"), e.name(t, "sem"), e.name(t, "election")
	var handles []string
	under := func(op string, args map[string]any) result {
		t.Helper()
		args["session"] = sh
		r := a.ok(t, op, args)
		handles = append(handles, r.str(t, "handle"))
		return r
	}
	under("acquire", map[string]any{"name": lock, "holder": "agent-a"})
	under("acquire", map[string]any{"name": shared, "holder": "reader-1", "mode": "shared"})
	under("acquire", map[string]any{"name": shared, "holder": "reader-2", "mode": "shared"})
	under("sem_acquire", map[string]any{"name": sem, "limit": 2, "holder": "agent-a"})
	under("campaign", map[string]any{"name": election, "holder": "agent-a", "value": "here", "wait_ms": 20000})

	if st, err := e.hc.Lock(c, lock); err != nil || !st.Held || st.Session != id {
		t.Fatalf("lock under the session: %+v, %v; want held under session %d", st, err, id)
	}
	if st, err := e.hc.Lock(c, shared); err != nil || len(st.SharedHolders) != 2 {
		t.Fatalf("shared lock: %+v, %v; want two shared holders", st, err)
	}
	if st, err := e.hc.Semaphore(c, sem); err != nil || len(st.Holders) != 1 {
		t.Fatalf("semaphore: %+v, %v; want one permit held", st, err)
	}
	if st, err := e.hc.ElectionLeader(c, election); err != nil || st.Holder != "agent-a" || st.Value != "here" {
		t.Fatalf("election: %+v, %v; want agent-a leading with value here", st, err)
	}

	a.ok(t, "session_close", map[string]any{"session": sh})
	for _, h := range handles {
		if st := a.ok(t, "lease_state", map[string]any{"handle": h}); !st.boolean(t, "lost") {
			t.Errorf("lease_state of %s after the session's close: %v, want lost", h, st)
		}
	}
	for _, name := range []string{lock, shared, election} {
		if st, err := e.hc.Lock(c, name); err != nil || st.Held || len(st.SharedHolders) > 0 {
			t.Errorf("%s after the session's close: %+v, %v; want free", name, st, err)
		}
	}
	if st, err := e.hc.Semaphore(c, sem); err != nil || len(st.Holders) != 0 {
		t.Errorf("semaphore after the session's close: %+v, %v; want no permit held", st, err)
	}

	m1, m2 := e.name(t, "m"), e.name(t, "m")
	r := a.ok(t, "multi_acquire", map[string]any{"names": []string{m1, m2}, "holder": "agent-a", "ttl_ms": ttlMs})
	token := r.u64(t, "token")
	for _, n := range []string{m1, m2} {
		if st, err := e.hc.Lock(c, n); err != nil || !st.Held || st.Token != token {
			t.Fatalf("%s: %+v, %v; want held with the multi-lock's token %d", n, st, err, token)
		}
	}
	a.ok(t, "release", map[string]any{"handle": r.str(t, "handle")})
	for _, n := range []string{m1, m2} {
		if st, err := e.hc.Lock(c, n); err != nil || st.Held {
			t.Errorf("%s after the multi-lock's release: %+v, %v; want free", n, st, err)
		}
	}
}
