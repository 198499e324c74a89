package checker

import (
	"strings"
	"testing"

	"github.com/fencer-io/fencer/api/wire"
	"github.com/fencer-io/fencer/test/chaos/history"
)

// A session's histories: session s10 (created at index 10) holds locks sa
// (t11) and sb (t12) and a permit of ss (t13) until its end at index 20.
// Tokens are plain log indexes (epoch 0).

func sessionCreated(c int, id uint64, ttlMillis int64, call, ret int64) history.Op {
	return history.Op{Kind: history.SessionCreate, Target: "c0", Holder: "c0", Client: c, Session: id, TTL: ttlMillis,
		Outcome: history.OK, Call: call, Return: ret}
}

func sessionOp(c int, kind history.OpKind, id uint64, out history.Outcome, call, ret int64) history.Op {
	op := history.Op{Kind: kind, Target: "c0", Client: c, Session: id, Outcome: out, Call: call, Return: ret}
	if out == history.SessionExpired {
		op.Code = wire.CodeSessionExpired
	}
	return op
}

func closed(c int, id uint64, call, ret int64, released ...uint64) history.Op {
	op := sessionOp(c, history.SessionClose, id, history.OK, call, ret)
	op.Released = released
	return op
}

func acquireUnder(c int, lock string, session, token uint64, call, ret int64) history.Op {
	op := acquireOK(c, lock, "c0", token, call, ret)
	op.Session = session
	return op
}

func permitUnder(c int, sem string, session, token uint64, call, ret int64) history.Op {
	return history.Op{Kind: history.SemAcquire, Target: sem, Client: c, Holder: "c0", Limit: 1, TTL: 1000, Session: session,
		Token: token, Outcome: history.OK, Call: call, Return: ret}
}

func boundPut(c int, lock string, token uint64, out history.Outcome, call, ret int64) history.Op {
	op := put(c, "kv."+lock, "v", token, out, call, ret)
	op.Lock = lock
	return op
}

func ev(index uint64, typ, name string, token uint64) history.WatchedEvent {
	return history.WatchedEvent{Index: index, Type: typ, Name: name, Token: token}
}

func sessionEv(index uint64, typ string, session uint64) history.WatchedEvent {
	return history.WatchedEvent{Index: index, Type: typ, Session: session}
}

// sessionHistory is s10's life with the given events after its grants,
// watched through index 30.
func sessionHistory(events ...history.WatchedEvent) history.History {
	h := history.History{
		Ops: []history.Op{
			sessionCreated(0, 10, 1000, 1, 2),
			acquireUnder(0, "sa", 10, 11, 3, 4),
			acquireUnder(0, "sb", 10, 12, 5, 6),
			permitUnder(0, "ss", 10, 13, 7, 8),
			boundPut(0, "sa", 11, history.OK, 9, 10),
			closed(0, 10, 11, 12, 11, 12, 13),
		},
		Watch: &history.Watch{
			Grants: []history.WatchedGrant{
				{Index: 11, Type: wire.EventAcquired, Lock: "sa", Token: 11, Session: 10},
				{Index: 12, Type: wire.EventAcquired, Lock: "sb", Token: 12, Session: 10},
			},
			Until: 30,
		},
	}
	h.Watch.Events = append([]history.WatchedEvent{
		sessionEv(10, wire.EventSessionCreated, 10),
		{Index: 13, Type: wire.EventPermitAcquired, Name: "ss", Token: 13, Session: 10},
		{Index: 14, Type: wire.EventPut, Key: "kv.sa", Token: 11},
	}, events...)
	return h
}

// closedTogether is s10's close ending all three grants in its entry.
var closedTogether = []history.WatchedEvent{
	ev(20, wire.EventReleased, "sa", 11),
	ev(20, wire.EventReleased, "sb", 12),
	ev(20, wire.EventPermitReleased, "ss", 13),
	sessionEv(20, wire.EventSessionClosed, 10),
}

func TestSessionChecksPassASessionEndedInOneEntry(t *testing.T) {
	h := sessionHistory(closedTogether...)
	for _, name := range []string{CheckSessionEnds, CheckSessionWrites, CheckSessionSurvivors, CheckPermits} {
		wantStatus(t, h, name, Pass)
	}
	// A grant released on its own before: the session and its other
	// grants go on.
	early := append([]history.WatchedEvent{ev(15, wire.EventReleased, "sb", 12)}, closedTogether[0], closedTogether[2], closedTogether[3])
	wantStatus(t, sessionHistory(early...), CheckSessionEnds, Pass)
	// The hand-off of a freed name in the session's entry ends the grant
	// there too.
	handed := []history.WatchedEvent{
		{Index: 20, Type: wire.EventHandedOff, Name: "sa", Token: 20, PrevToken: 11, Reason: wire.EventReleased},
		closedTogether[1], closedTogether[2], closedTogether[3],
	}
	wantStatus(t, sessionHistory(handed...), CheckSessionEnds, Pass)
}

// The close answers that it ended only the first grant.
func TestSessionEndsFailOnACloseThatLeavesGrants(t *testing.T) {
	h := sessionHistory(closedTogether...)
	h.Watch = nil
	wantStatus(t, h, CheckSessionEnds, Pass)
	h.Ops[5] = closed(0, 10, 11, 12, 11)
	wantMessage(t, wantStatus(t, h, CheckSessionEnds, Fail), "session s10's close answered ok releasing [11], without t12 (sb), t13 (ss)")
	// A grant released on its own before is not the close's to release.
	h.Ops = append(h.Ops, release(0, "sb", 12, history.OK, 9, 10), history.Op{Kind: history.SemRelease, Target: "ss", Token: 13, Outcome: history.Unknown, Call: 10, Return: 11})
	wantStatus(t, h, CheckSessionEnds, Pass)
}

// The end entry ends only the first grant: the others never end.
func TestSessionEndsFailWhenGrantsOutliveTheEndEntry(t *testing.T) {
	h := sessionHistory(closedTogether[0], closedTogether[3])
	v := wantStatus(t, h, CheckSessionEnds, Fail)
	wantMessage(t, v, "session s10 ended at index 20", "sb's grant t12", "no end of it up to index 30")
	wantMessage(t, v, "semaphore ss's grant t13")
	v = wantStatus(t, h, CheckSessionSurvivors, Fail)
	wantMessage(t, v, "session s10 ended at index 20", "t12", "still held at index 30")

	// Ended, but later.
	late := sessionHistory(closedTogether[0], closedTogether[2], closedTogether[3], ev(25, wire.EventReleased, "sb", 12))
	wantMessage(t, wantStatus(t, late, CheckSessionEnds, Fail), "t12", "ended at index 25")
	wantMessage(t, wantStatus(t, late, CheckSessionSurvivors, Fail), "t12", "held on until index 25")
}

func TestSessionEndsFailOnAGrantExpiringOnItsOwn(t *testing.T) {
	h := sessionHistory(ev(15, wire.EventExpired, "sb", 12), closedTogether[0], closedTogether[2], closedTogether[3])
	wantMessage(t, wantStatus(t, h, CheckSessionEnds, Fail), "t12", "ended expired at index 15", "no lease of its own")
}

func TestSessionEndsFailOnTwoEnds(t *testing.T) {
	h := sessionHistory(append(closedTogether, sessionEv(22, wire.EventSessionExpired, 10))...)
	wantMessage(t, wantStatus(t, h, CheckSessionEnds, Fail), "session s10 ended 2 times")
	never := sessionHistory()
	wantMessage(t, wantStatus(t, never, CheckSessionEnds, Fail), "session s10, created at index 10, never ended")
	// A restore ends every session without a session event: its grants
	// are voided.
	restored := sessionHistory(ev(25, wire.EventVoided, "sa", 11), ev(25, wire.EventVoided, "sb", 12), ev(25, wire.EventVoided, "ss", 13))
	wantStatus(t, restored, CheckSessionEnds, Pass)
}

// What the stream did not show is not judged.
func TestSessionChecksSkipWhatTheWatchMissed(t *testing.T) {
	// sb and ss may have been released while the watcher could not see.
	h := sessionHistory(closedTogether[0], closedTogether[3])
	h.Watch.Gaps = []history.WatchGap{{After: 14, Until: 19}}
	wantStatus(t, h, CheckSessionEnds, Pass)
	wantStatus(t, h, CheckSessionSurvivors, Pass)
	// The session's entry was seen without their ends; they may have
	// ended unseen later, but they did not end with the session.
	h.Watch.Gaps = []history.WatchGap{{After: 21, Until: 25}}
	wantStatus(t, h, CheckSessionEnds, Fail)
	wantStatus(t, h, CheckSessionSurvivors, Pass)
}

func TestSessionWritesFailOnABoundWriteAfterTheEnd(t *testing.T) {
	h := sessionHistory(append(closedTogether, history.WatchedEvent{Index: 22, Type: wire.EventPut, Key: "kv.sa", Token: 11})...)
	h.Ops = append(h.Ops, boundPut(0, "sa", 11, history.Unknown, 13, 40))
	wantMessage(t, wantStatus(t, h, CheckSessionWrites, Fail), "lock-bound write of kv.sa with t11", "session s10", "accepted at index 22, after the session ended at index 20")

	// An unbound put is fenced by its token alone: the cluster may take it.
	h.Ops[len(h.Ops)-1].Lock = ""
	wantStatus(t, h, CheckSessionWrites, Pass)

	// Acknowledged after the client was told the session was closed.
	h = sessionHistory(closedTogether...)
	h.Ops = append(h.Ops, boundPut(0, "sb", 12, history.OK, 13, 14))
	wantMessage(t, wantStatus(t, h, CheckSessionWrites, Fail), "kv.sb with t12", "sent at 13, after a client was told at 12")
	h.Ops[len(h.Ops)-1].Outcome, h.Ops[len(h.Ops)-1].Code = history.NotLockHolder, wire.CodeNotLockHolder
	wantStatus(t, h, CheckSessionWrites, Pass)
}

func TestSessionSurvivorsFailOnAGrantSeenAfterTheEnd(t *testing.T) {
	h := sessionHistory(closedTogether...)
	h.Ops[5] = sessionOp(0, history.SessionRenew, 10, history.SessionExpired, 11, 12)
	h.Ops = append(h.Ops, readHeld(1, "sa", 11, 13, 14))
	wantMessage(t, wantStatus(t, h, CheckSessionSurvivors, Fail), "lock sa's grant t11", "reported current at 13, after a client was told at 12 that session s10 had ended")

	// Granted under the session after its end.
	h = sessionHistory(closedTogether...)
	h.Ops = append(h.Ops, acquireUnder(0, "sc", 10, 25, 13, 14))
	wantMessage(t, wantStatus(t, h, CheckSessionSurvivors, Fail), "session s10 ended at index 20, and its lock sc's grant t25", "was granted after that")
}

// A permit under a session is certainly live only as long as its session
// is: not past the session's close, nor past its TTL from its last
// renewal.
func TestPermitUnderASessionLivesAsLongAsTheSession(t *testing.T) {
	other := history.Op{Kind: history.SemAcquire, Target: "ss", Client: 1, Holder: "c1", Limit: 1, TTL: 1000, Token: 21, Outcome: history.OK, Call: 30, Return: 31}
	h := sessionHistory(closedTogether...)
	h.Ops = append(h.Ops, other)
	wantStatus(t, h, CheckPermits, Pass)

	// Without its close, the session outlasts the other permit's grant
	// (its TTL, a second, runs from the creation's call at 1 ns).
	h.Ops = append(h.Ops[:5:5], other)
	wantMessage(t, wantStatus(t, h, CheckPermits, Fail), "semaphore ss: 2 permits certainly live at once")
}

// wantMessage checks that some violation of v has a message containing
// each of the fragments.
func wantMessage(t *testing.T, v Verdict, fragments ...string) {
	t.Helper()
	for _, vi := range v.Violations {
		all := true
		for _, f := range fragments {
			all = all && strings.Contains(vi.Message, f)
		}
		if all {
			return
		}
	}
	t.Errorf("%s: no violation with %q in:\n%s", v.Name, fragments, messages(v))
}

func messages(v Verdict) string {
	var b strings.Builder
	for _, vi := range v.Violations {
		b.WriteString("  " + vi.Message + "\n")
	}
	return b.String()
}
