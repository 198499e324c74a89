package checker

import (
	"strings"
	"testing"

	"github.com/fencer-io/fencer/test/chaos/history"
)

func TestUniqueGrants(t *testing.T) {
	bad := history.History{Ops: []history.Op{
		acquireOK(0, "a", "h1", 5, 0, 10),
		acquireOK(1, "b", "h2", 5, 20, 30),
	}}
	wantEvidence(t, wantStatus(t, bad, CheckUniqueGrants, Fail), "acquire(b, h2) -> ok t5")
	// Same history on one lock: the lock model catches it too.
	good := history.History{Ops: []history.Op{
		acquireOK(0, "a", "h1", 5, 0, 10),
		acquireOK(1, "b", "h2", 6, 20, 30),
	}}
	wantStatus(t, good, CheckUniqueGrants, Pass)
}

func TestGrantOrder(t *testing.T) {
	bad := history.History{Ops: []history.Op{
		acquireOK(0, "a", "h1", 9, 0, 10),
		acquireOK(1, "a", "h2", 7, 20, 30),
		acquireOK(2, "a", "h3", 8, 40, 50),
	}}
	v := wantStatus(t, bad, CheckGrantOrder, Fail)
	if len(v.Violations) != 2 {
		t.Errorf("want t7 and t8 each reported against t9, got %+v", v.Violations)
	}
	wantEvidence(t, v, "ok t7")
	good := history.History{Ops: []history.Op{
		acquireOK(0, "a", "h1", 9, 0, 30), // concurrent with the t7 grant
		acquireOK(1, "a", "h2", 7, 10, 20),
		acquireOK(2, "a", "h3", 11, 40, 50),
		acquireOK(2, "b", "h3", 1, 60, 70), // other locks do not count
	}}
	wantStatus(t, good, CheckGrantOrder, Pass)
}

// Grants on different locks across a restore: no lock sees a regression, so
// only the epoch invariant can tell.
func TestEpochTokens(t *testing.T) {
	ops := []history.Op{
		acquireOK(0, "a", "h1", 100, 0, 10),
		readHeld(1, "b", 120, 20, 30), // acknowledged via an unseen grant
		acquireOK(2, "c", "h3", 110, 60, 70),
	}
	for _, kind := range []history.EventKind{history.EventRestart, history.EventRestore, history.EventReplace} {
		t.Run(string(kind), func(t *testing.T) {
			h := history.History{Ops: ops, Events: []history.Event{{Kind: kind, Time: 50, Description: "nemesis"}}}
			v := wantStatus(t, h, CheckEpochTokens, Fail)
			wantEvidence(t, v, "held t120")
			wantEvidence(t, v, "ok t110")
			if len(v.Violations[0].Events) != 1 {
				t.Errorf("violation does not cite the event: %+v", v.Violations[0])
			}
			wantStatus(t, h, CheckGrantOrder, Pass)
		})
	}
	t.Run("not an epoch", func(t *testing.T) {
		h := history.History{Ops: ops, Events: []history.Event{{Kind: "partition", Time: 50}}}
		wantStatus(t, h, CheckEpochTokens, Skipped)
	})
	t.Run("tokens move on", func(t *testing.T) {
		h := history.History{Ops: []history.Op{
			acquireOK(0, "a", "h1", 100, 0, 10),
			acquireOK(2, "c", "h3", 1<<32|7, 60, 70),
			acquireOK(2, "d", "h3", 90, 40, 70), // called before the event
		}, Events: []history.Event{{Kind: history.EventRestore, Time: 50}}}
		wantStatus(t, h, CheckEpochTokens, Pass)
	})
}

func TestFenceOrderResourceLog(t *testing.T) {
	for name, log := range map[string][]history.Stamp{
		"older token":     {{Token: 5}, {Token: 3}},
		"replayed token":  {{Token: 5}, {Token: 5}},
		"replayed seq":    {{Token: 5, Seq: 1}, {Token: 5, Seq: 2}, {Token: 5, Seq: 2}},
		"below a highest": {{Token: 5}, {Token: 9}, {Token: 7}},
	} {
		t.Run(name, func(t *testing.T) {
			h := history.History{Accepted: map[string][]history.Stamp{"k": log, "j": {{Token: 1}}}}
			v := wantStatus(t, h, CheckFenceOrder, Fail)
			if !strings.HasPrefix(v.Violations[0].Message, "k:") {
				t.Errorf("violation names the wrong key: %s", v.Violations[0].Message)
			}
		})
	}
	good := history.History{Accepted: map[string][]history.Stamp{"k": {{Token: 3}, {Token: 5, Seq: 1}, {Token: 5, Seq: 2}, {Token: 8}}}}
	wantStatus(t, good, CheckFenceOrder, Pass)
}

func TestFenceOrderCitesTheWriters(t *testing.T) {
	h := history.History{
		Ops: []history.Op{
			put(0, "k", "new", 5, history.OK, 0, 10),
			put(1, "k", "old", 3, history.Unknown, 0, 10),
		},
		Accepted: map[string][]history.Stamp{"k": {{Token: 5}, {Token: 3}}},
	}
	v := wantStatus(t, h, CheckFenceOrder, Fail)
	wantEvidence(t, v, `"old"`)
	wantEvidence(t, v, `"new"`)
}

func TestFenceOrderAcknowledgedPuts(t *testing.T) {
	bad := history.History{Ops: []history.Op{
		put(0, "k", "a", 5, history.OK, 0, 10),
		put(1, "k", "b", 3, history.OK, 20, 30),
	}}
	wantEvidence(t, wantStatus(t, bad, CheckFenceOrder, Fail), `"b"`)
	good := history.History{Ops: []history.Op{
		put(0, "k", "a", 5, history.OK, 0, 30),
		put(1, "k", "b", 3, history.OK, 10, 20), // concurrent: the fence saw b first
		put(1, "k", "c", 2, history.StaleToken, 40, 50),
		put(1, "j", "d", 1, history.OK, 40, 50),
	}}
	wantStatus(t, good, CheckFenceOrder, Pass)
}

func TestNoLostWrite(t *testing.T) {
	writes := []history.Op{
		put(0, "k", "a", 5, history.OK, 0, 10),
		put(0, "k", "b", 7, history.OK, 20, 30),
		put(1, "k", "c", 9, history.Unknown, 40, 50),
		put(1, "k", "d", 6, history.StaleToken, 40, 50),
	}
	for _, tc := range []struct {
		name  string
		final []history.FinalRead
		want  Status
	}{
		{"newest acknowledged", []history.FinalRead{{Key: "k", Found: true, Value: "b", Token: 7}}, Pass},
		{"newer indeterminate", []history.FinalRead{{Key: "k", Found: true, Value: "c", Token: 9}}, Pass},
		{"older acknowledged", []history.FinalRead{{Key: "k", Found: true, Value: "a", Token: 5}}, Fail},
		{"not found", []history.FinalRead{{Key: "k"}}, Fail},
		{"missing", []history.FinalRead{{Key: "other"}}, Fail},
		{"refused write", []history.FinalRead{{Key: "k", Found: true, Value: "d", Token: 6}}, Fail},
		{"right token, wrong value", []history.FinalRead{{Key: "k", Found: true, Value: "x", Token: 7}}, Fail},
		{"a key nobody wrote is found", []history.FinalRead{{Key: "k", Found: true, Value: "b", Token: 7}, {Key: "j", Found: true, Value: "z", Token: 1}}, Fail},
		{"a key nobody wrote is empty", []history.FinalRead{{Key: "k", Found: true, Value: "b", Token: 7}, {Key: "j"}}, Pass},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wantStatus(t, history.History{Ops: writes, FinalReads: tc.final}, CheckNoLostWrite, tc.want)
		})
	}
	t.Run("not taken", func(t *testing.T) {
		wantStatus(t, history.History{Ops: writes}, CheckNoLostWrite, Skipped)
	})
}

func TestMemberHashes(t *testing.T) {
	v := wantStatus(t, history.History{MemberHashes: map[string]string{"n1": "aa", "n2": "aa", "n3": "bb"}}, CheckMemberHashes, Fail)
	if !strings.Contains(v.Violations[0].Message, "bb: n3") {
		t.Errorf("violation does not say who diverged: %s", v.Violations[0].Message)
	}
	wantStatus(t, history.History{MemberHashes: map[string]string{"n1": "aa", "n2": "aa", "n3": "aa"}}, CheckMemberHashes, Pass)
	wantStatus(t, history.History{}, CheckMemberHashes, Skipped)
}

func TestUnseenGrants(t *testing.T) {
	for _, tc := range []struct {
		name string
		ops  []history.Op
		want Status
	}{
		{"a token nobody granted", []history.Op{
			acquireOK(0, "a", "h1", 5, 0, 10),
			readHeld(1, "a", 9, 20, 30),
		}, Fail},
		{"a token granted on another lock", []history.Op{
			acquireOK(0, "b", "h1", 9, 0, 10),
			acquireUnknown(1, "a", "h2", 0, 10),
			readHeld(1, "a", 9, 20, 30),
		}, Pass}, // UnseenGrants accepts it; the lock model does not
		{"two unseen tokens, one unknown acquire", []history.Op{
			acquireUnknown(1, "a", "h2", 0, 10),
			readHeld(2, "a", 9, 20, 30),
			renew(2, "a", 11, history.OK, 40, 50),
		}, Fail},
		{"an unknown acquire called after the token was seen", []history.Op{
			readHeld(2, "a", 9, 20, 30),
			acquireUnknown(1, "a", "h2", 40, 50),
		}, Fail},
		{"an unknown acquire on another lock", []history.Op{
			acquireUnknown(1, "b", "h2", 0, 10),
			readHeld(2, "a", 9, 20, 30),
		}, Fail},
		{"each unseen token has its acquire", []history.Op{
			acquireUnknown(1, "a", "h2", 0, 10),
			readHeld(2, "a", 9, 20, 30),
			acquireHeld(3, "a", "h3", "h2", 9, 25, 35),
			{Kind: history.Acquire, Target: "a", Client: 1, Holder: "h4", Outcome: history.OtherError, Error: "500", Call: 40, Return: 50},
			renew(2, "a", 11, history.OK, 60, 70),
		}, Pass},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wantStatus(t, history.History{Ops: tc.ops}, CheckUnseenGrants, tc.want)
		})
	}
	wantStatus(t, history.History{Ops: []history.Op{
		acquireOK(0, "b", "h1", 9, 0, 10),
		acquireUnknown(1, "a", "h2", 0, 10),
		readHeld(1, "a", 9, 20, 30),
	}}, CheckLocks, Fail)
}
