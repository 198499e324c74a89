package checker

import (
	"testing"
	"time"

	"github.com/fencer-io/fencer/test/chaos/history"
)

// Times in these histories are in milliseconds, so that they read against
// the TTLs; the checks take nanoseconds.
const ms = int64(time.Millisecond)

func semAcquireOK(c int, sem, holder string, limit int, ttl int64, token uint64, call, ret int64) history.Op {
	return history.Op{Kind: history.SemAcquire, Target: sem, Client: c, Holder: holder, Limit: limit, TTL: ttl, Token: token,
		Outcome: history.OK, Call: call * ms, Return: ret * ms}
}

func semOp(kind history.OpKind, c int, sem string, token uint64, out history.Outcome, call, ret int64) history.Op {
	return history.Op{Kind: kind, Target: sem, Client: c, Token: token, Outcome: out, Call: call * ms, Return: ret * ms}
}

// Three permits of a limit-2 semaphore certainly live at once: the checker
// must fail it; the same grants where the service can have expired or had
// released one in time must pass.
func TestPermitLimits(t *testing.T) {
	bad := history.History{Ops: []history.Op{
		semAcquireOK(0, "s", "c0", 2, 1000, 10, 0, 10),
		semAcquireOK(1, "s", "c1", 2, 1000, 11, 20, 30),
		semAcquireOK(2, "s", "c2", 2, 1000, 12, 500, 510), // 0 and 1 have at least 490ms left
	}}
	v := wantStatus(t, bad, CheckPermits, Fail)
	wantEvidence(t, v, "sem_acquire(s, c2, limit 2, ttl 1000ms) -> ok t12")
	wantEvidence(t, v, "ok t10")

	for name, h := range map[string]history.History{
		"the first lease can have ended": {Ops: []history.Op{
			semAcquireOK(0, "s", "c0", 2, 1000, 10, 0, 10),
			semAcquireOK(1, "s", "c1", 2, 1000, 11, 20, 30),
			semAcquireOK(2, "s", "c2", 2, 1000, 12, 1005, 1010),
		}},
		"a release was sent first": {Ops: []history.Op{
			semAcquireOK(0, "s", "c0", 2, 1000, 10, 0, 10),
			semAcquireOK(1, "s", "c1", 2, 1000, 11, 20, 30),
			semOp(history.SemRelease, 0, "s", 10, history.Unknown, 400, 600),
			semAcquireOK(2, "s", "c2", 2, 1000, 12, 500, 510),
		}},
		"other semaphores do not count": {Ops: []history.Op{
			semAcquireOK(0, "s", "c0", 2, 1000, 10, 0, 10),
			semAcquireOK(1, "s", "c1", 2, 1000, 11, 20, 30),
			semAcquireOK(2, "r", "c2", 2, 1000, 12, 500, 510),
		}},
		"a restore dropped them": {Ops: []history.Op{
			semAcquireOK(0, "s", "c0", 2, 1000, 10, 0, 10),
			semAcquireOK(1, "s", "c1", 2, 1000, 11, 20, 30),
			semAcquireOK(2, "s", "c2", 2, 1000, 112, 500, 510),
		}, Events: []history.Event{{Kind: history.EventRestore, Time: 300 * ms}}},
		"the answer was lost": {Ops: []history.Op{
			semAcquireOK(0, "s", "c0", 2, 1000, 10, 0, 10),
			semAcquireOK(1, "s", "c1", 2, 1000, 11, 20, 30),
			{Kind: history.SemAcquire, Target: "s", Client: 2, Holder: "c2", Limit: 2, TTL: 1000, Outcome: history.Unknown, Call: 500 * ms, Return: 600 * ms},
		}},
	} {
		t.Run(name, func(t *testing.T) { wantStatus(t, h, CheckPermits, Pass) })
	}

	// A renewal that answered ok keeps the permit live for another TTL
	// from its call: a third grant 1.5s in is then one too many.
	renewed := history.History{Ops: []history.Op{
		semAcquireOK(0, "s", "c0", 2, 1000, 10, 0, 10),
		semOp(history.SemRenew, 0, "s", 10, history.OK, 800, 810),
		semAcquireOK(1, "s", "c1", 2, 1000, 11, 1000, 1010),
		semAcquireOK(2, "s", "c2", 2, 1000, 12, 1500, 1510),
	}}
	wantStatus(t, renewed, CheckPermits, Fail)
	renewed.Ops[1].Outcome = history.LeaseLost
	wantStatus(t, renewed, CheckPermits, Pass)
}

func campaignOK(c int, election, holder, value string, token uint64, call, ret int64) history.Op {
	return history.Op{Kind: history.Campaign, Target: election, Client: c, Holder: holder, Value: value, Token: token,
		Outcome: history.OK, Call: call, Return: ret}
}

func seen(observer, session int, election, holder string, token uint64, value string, at int64) history.Observation {
	return history.Observation{Observer: observer, Session: session, Election: election, Holder: holder, Token: token, Value: value, Time: at}
}

func TestOneLeaderPerTerm(t *testing.T) {
	ops := []history.Op{
		campaignOK(0, "e", "c0", "c0.v1", 10, 0, 10),
		{Kind: history.Proclaim, Target: "e", Client: 0, Token: 10, Value: "c0.v2", Outcome: history.Unknown, Call: 20, Return: 30},
		campaignOK(1, "e", "c1", "c1.v1", 20, 15, 40),
	}
	good := history.History{Ops: ops, Observations: []history.Observation{
		seen(5, 0, "e", "c0", 10, "c0.v1", 12),
		seen(5, 0, "e", "c0", 10, "c0.v2", 25),
		seen(5, 0, "e", "c1", 20, "c1.v1", 45),
	}}
	wantStatus(t, good, CheckLeaders, Pass)

	// An observer names another holder for a campaign's term.
	bad := history.History{Ops: ops, Observations: []history.Observation{seen(5, 0, "e", "c1", 10, "c1.v1", 12)}}
	v := wantStatus(t, bad, CheckLeaders, Fail)
	wantEvidence(t, v, "campaign(e, c0")
	// Two campaigns granted one term.
	twice := history.History{Ops: append(ops[:2:2], campaignOK(1, "e", "c1", "c1.v1", 10, 15, 40))}
	wantStatus(t, twice, CheckLeaders, Fail)
	// A value its leader never published in that term (c1's, under c0).
	foreign := history.History{Ops: ops, Observations: []history.Observation{seen(5, 0, "e", "c0", 10, "c1.v1", 12)}}
	wantStatus(t, foreign, CheckLeaders, Fail)
}

func TestObserverOrder(t *testing.T) {
	good := history.History{Observations: []history.Observation{
		seen(5, 0, "e", "c0", 10, "a", 1),
		seen(5, 0, "e", "c0", 10, "b", 2),
		seen(5, 1, "e", "c0", 10, "b", 3), // a new session re-reads the leader
		seen(5, 1, "e", "c1", 20, "c", 4),
		seen(6, 0, "e", "c0", 10, "a", 2), // another observer, its own order
		seen(6, 0, "f", "c2", 15, "d", 3), // another election
	}}
	wantStatus(t, good, CheckObservers, Pass)
	for name, obs := range map[string][]history.Observation{
		"back in time": {
			seen(5, 0, "e", "c1", 20, "c", 1),
			seen(5, 0, "e", "c0", 10, "b", 2),
		},
		"a term twice": {
			seen(5, 0, "e", "c0", 10, "a", 1),
			seen(5, 0, "e", "c0", 10, "a", 2),
		},
		"an old value of the term again": {
			seen(5, 0, "e", "c0", 10, "a", 1),
			seen(5, 0, "e", "c0", 10, "b", 2),
			seen(5, 1, "e", "c0", 10, "a", 3),
		},
		"back in time across sessions": {
			seen(5, 0, "e", "c1", 20, "c", 1),
			seen(5, 1, "e", "c0", 10, "b", 2),
		},
	} {
		t.Run(name, func(t *testing.T) {
			v := wantStatus(t, history.History{Observations: obs}, CheckObservers, Fail)
			if len(v.Violations[0].Observations) != 2 {
				t.Errorf("want the two sightings as evidence: %+v", v.Violations[0])
			}
		})
	}
}
