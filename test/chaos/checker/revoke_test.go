package checker

import (
	"strings"
	"testing"

	"github.com/fencer-io/fencer/api/wire"
	"github.com/fencer-io/fencer/test/chaos/history"
)

// Lock a's grant t5 is revoked by client 1 (its revoke answered at 20,
// at index 8, handing a to t8); client 0, its holder, writes under the
// lock binding.
func revokeHistory(ops ...history.Op) history.History {
	h := history.History{
		Ops: append([]history.Op{
			acquireOK(0, "a", "c0", 5, 1, 2),
			boundPut(0, "a", 5, history.OK, 3, 4),
			{Kind: history.Revoke, Target: "a", Token: 5, Client: 1, Outcome: history.OK, Call: 10, Return: 20},
		}, ops...),
		Watch: &history.Watch{
			Grants: []history.WatchedGrant{{Index: 5, Type: wire.EventAcquired, Lock: "a", Token: 5}},
			Events: []history.WatchedEvent{
				{Index: 6, Type: wire.EventPut, Key: "kv.a", Token: 5},
				{Index: 8, Type: wire.EventHandedOff, Name: "a", Token: 8, PrevToken: 5, Reason: wire.EventRevoked},
			},
			Until: 30,
		},
	}
	return h
}

func TestRevokedWrites(t *testing.T) {
	refusedLate := boundPut(0, "a", 5, history.NotLockHolder, 21, 22)
	refusedLate.Code = wire.CodeNotLockHolder
	renewRevoked := history.Op{Kind: history.Renew, Target: "a", Token: 5, Client: 0, Outcome: history.Revoked, Code: wire.CodeRevoked, Call: 23, Return: 24}
	if vs := RevokedWrites(revokeHistory(refusedLate, renewRevoked)); len(vs) != 0 {
		t.Fatalf("refused writes after a revoke: %v", vs)
	}
	// Concurrent with the revoke: either order is fine.
	if vs := RevokedWrites(revokeHistory(boundPut(0, "a", 5, history.OK, 12, 25))); len(vs) != 0 {
		t.Fatalf("a write concurrent with the revoke: %v", vs)
	}
	// Acknowledged after the revoke was answered: the rule broken.
	vs := RevokedWrites(revokeHistory(boundPut(0, "a", 5, history.OK, 21, 22)))
	if len(vs) != 1 || !strings.Contains(vs[0].Message, "after the grant's revoke was answered") {
		t.Fatalf("a lock-bound write acknowledged after the revoke: %v", vs)
	}
	// Told by a refused renewal, not by the revoke's own answer (another
	// client's revoke whose answer was lost).
	lost := revokeHistory(renewRevoked, boundPut(0, "a", 5, history.OK, 26, 27))
	lost.Ops[2].Outcome = history.Unknown
	if vs := RevokedWrites(lost); len(vs) != 1 {
		t.Fatalf("a write acknowledged after its holder's renewal was refused revoked: %v", vs)
	}
	// In the log: accepted at an index after the revoke's, with every
	// acknowledged put of t5 to kv.a lock-bound.
	inLog := revokeHistory()
	inLog.Watch.Events = append(inLog.Watch.Events, history.WatchedEvent{Index: 9, Type: wire.EventPut, Key: "kv.a", Token: 5})
	if vs := RevokedWrites(inLog); len(vs) != 1 || !strings.Contains(vs[0].Message, "index 9, after the revoke") {
		t.Fatalf("a lock-bound put accepted after the revoke's entry: %v", vs)
	}
	// ... unless an unbound put of t5 to kv.a was acknowledged: it may be
	// the one the stream shows.
	unbound := inLog
	unbound.Ops = append(append([]history.Op{}, inLog.Ops...), put(0, "kv.a", "u", 5, history.OK, 21, 22))
	if vs := RevokedWrites(unbound); len(vs) != 0 {
		t.Fatalf("an unbound put after the revoke: %v", vs)
	}
	// The same with the revoked event of a revoke that handed off to nobody.
	plain := revokeHistory()
	plain.Watch.Events[1] = history.WatchedEvent{Index: 8, Type: wire.EventRevoked, Name: "a", Token: 5}
	plain.Watch.Events = append(plain.Watch.Events, history.WatchedEvent{Index: 9, Type: wire.EventPut, Key: "kv.a", Token: 5})
	if vs := RevokedWrites(plain); len(vs) != 1 {
		t.Fatalf("a lock-bound put accepted after a revoked event: %v", vs)
	}
	if err := revokeHistory(refusedLate, renewRevoked).Validate(); err != nil {
		t.Fatalf("a history with revokes: %v", err)
	}
}

// The lock model reads a revoke as an expiry the operator asked for: ok
// ends the grant, so a grant of the waiter right after is linearizable,
// and a renewal of the revoked grant refused revoked is too; a renewal
// acknowledged after the revoke is not.
func TestLockModelReadsRevokes(t *testing.T) {
	revoke := history.Op{Kind: history.Revoke, Target: "a", Token: 5, Client: 1, Outcome: history.OK, Call: 10, Return: 20}
	renew := func(out history.Outcome, code string, call, ret int64) history.Op {
		return history.Op{Kind: history.Renew, Target: "a", Token: 5, Client: 0, Outcome: out, Code: code, Call: call, Return: ret}
	}
	ok := history.History{Ops: []history.Op{acquireOK(0, "a", "c0", 5, 1, 2), revoke, acquireOK(2, "a", "c2", 8, 21, 22), renew(history.Revoked, wire.CodeRevoked, 23, 24)}}
	if r := Check(ok, Options{}); !verdict(r, CheckLocks).OK() {
		t.Fatalf("a revoke, the next grant and a refused renewal: %+v", verdict(r, CheckLocks))
	}
	bad := history.History{Ops: []history.Op{acquireOK(0, "a", "c0", 5, 1, 2), revoke, renew(history.OK, "", 23, 24)}}
	if r := Check(bad, Options{}); verdict(r, CheckLocks).Status != Fail {
		t.Fatalf("a renewal acknowledged after the revoke: %+v", verdict(r, CheckLocks))
	}
}

func verdict(r Report, name string) Verdict {
	for _, v := range r.Verdicts {
		if v.Name == name {
			return v
		}
	}
	return Verdict{Name: name, Status: "missing"}
}
