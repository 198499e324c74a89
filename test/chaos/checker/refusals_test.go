package checker

import (
	"testing"

	"github.com/fencer-io/fencer/test/chaos/history"
)

// A put whose token the cluster had granted, and told its client of, before
// the put was sent, is refused as never issued: the refusal is false.
func TestFalseUnissuedFails(t *testing.T) {
	for _, tc := range []struct {
		name     string
		h        history.History
		evidence []string
	}{
		{name: "the put's own grant", h: history.History{Ops: []history.Op{
			acquireOK(0, "a", "c0", 5, 0, 10),
			refused(0, "kv.a", "x", 5, "unissued_token", 20, 30),
		}}, evidence: []string{"acquire(a, c0) -> ok t5", "refused unissued_token"}},
		// The put's own grant unseen (its answer lost), but tokens only
		// grow, so t5 is not above every token granted.
		{name: "a greater token seen on another lock", h: history.History{Ops: []history.Op{
			acquireUnknown(0, "a", "c0", 0, 10),
			readHeld(1, "b", 9, 12, 15),
			refused(0, "kv.a", "x", 5, "unissued_token", 20, 30),
		}}, evidence: []string{"held t9"}},
		{name: "a retried put ends refused", h: history.History{Ops: []history.Op{
			acquireOK(0, "a", "c0", 5, 0, 10),
			withCode(put(0, "kv.a", "x", 5, history.Unknown, 20, 30), "unissued_token"),
		}}, evidence: []string{"ok t5"}},
		{name: "an observer saw the term", h: history.History{
			Ops:          []history.Op{refused(0, "res.e", "x", 10, "unissued_token", 20, 30)},
			Observations: []history.Observation{seen(3, 0, "e", "c1", 10, "c1.v1", 15)},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := wantStatus(t, tc.h, CheckUnissued, Fail)
			for _, f := range tc.evidence {
				wantEvidence(t, v, f)
			}
			if v.Violations[0].Message == "" || len(v.Violations[0].Ops)+len(v.Violations[0].Observations) < 2 {
				t.Errorf("violation does not name the put and the grant: %+v", v.Violations[0])
			}
		})
	}
}

// An unissued_token is true, as far as the history tells, when no token as
// great had been acknowledged before the put was sent.
func TestFalseUnissuedPasses(t *testing.T) {
	for name, ops := range map[string][]history.Op{
		"a token above every grant": {
			acquireOK(0, "a", "c0", 5, 0, 10),
			refused(0, "kv.a", "x", 6, "unissued_token", 20, 30),
		},
		"a put sent before the grant returned": {
			acquireOK(0, "a", "c0", 5, 0, 25),
			refused(1, "kv.a", "x", 5, "unissued_token", 20, 30),
		},
		"stale_token for an issued token": {
			acquireOK(0, "a", "c0", 5, 0, 10),
			put(0, "kv.a", "x", 5, history.OK, 20, 30),
			withCode(put(0, "kv.a", "y", 5, history.StaleToken, 40, 50), "stale_token"),
		},
	} {
		t.Run(name, func(t *testing.T) {
			wantStatus(t, history.History{Ops: ops}, CheckUnissued, Pass)
		})
	}
	wantStatus(t, history.History{Ops: []history.Op{acquireOK(0, "a", "c0", 5, 0, 10)}}, CheckUnissued, Skipped)
}
