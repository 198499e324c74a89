package checker

import (
	"strings"
	"testing"

	"github.com/fencer-io/fencer/test/chaos/history"
)

func watched(typ, lock string, token uint64) history.WatchedGrant {
	return history.WatchedGrant{Index: tokenIndex(token), Type: typ, Lock: lock, Token: token}
}

// A watcher's stream passes when it holds every acknowledged grant in token
// order, and fails when it misses one, reorders two, repeats one or names
// another lock; grants in a gap or after the watch ended are excused.
func TestWatchedGrants(t *testing.T) {
	ops := []history.Op{
		acquireOK(0, "a", "h1", 5, 0, 10),
		acquireOK(1, "b", "h2", 7, 20, 30),
		acquireOK(2, "a", "h3", 9, 40, 50),
	}
	full := []history.WatchedGrant{watched("acquired", "a", 5), watched("acquired", "b", 7), watched("handed_off", "a", 9)}
	wantStatus(t, history.History{Ops: ops, Watch: &history.Watch{Grants: full, Until: 9}}, CheckWatch, Pass)
	wantStatus(t, history.History{Ops: ops}, CheckWatch, Skipped)

	missing := wantStatus(t, history.History{Ops: ops, Watch: &history.Watch{Grants: []history.WatchedGrant{full[0], full[2]}, Until: 9}}, CheckWatch, Fail)
	wantEvidence(t, missing, "acquire(b, h2) -> ok t7")
	// The same grant in a gap, or after the watch's end, is excused.
	wantStatus(t, history.History{Ops: ops, Watch: &history.Watch{Grants: []history.WatchedGrant{full[0], full[2]}, Gaps: []history.WatchGap{{After: 6, Until: 8}}, Until: 9}}, CheckWatch, Pass)
	wantStatus(t, history.History{Ops: ops, Watch: &history.Watch{Grants: full[:2], Until: 8}}, CheckWatch, Pass)

	for name, grants := range map[string][]history.WatchedGrant{
		"token order": {full[0], full[2], {Index: 10, Type: "acquired", Lock: "b", Token: 7}},
		"log order":   {full[0], full[2], full[1]},
		"twice":       {full[0], full[1], full[1], full[2]},
		"other lock":  {full[0], watched("acquired", "c", 7), full[2]},
	} {
		v := wantStatus(t, history.History{Ops: ops, Watch: &history.Watch{Grants: grants, Until: 9}}, CheckWatch, Fail)
		if len(v.Violations) == 0 || v.Violations[0].Message == "" {
			t.Errorf("%s: %+v", name, v)
		}
	}
	// A campaign's grant counts as an acquire's does.
	campaign := history.Op{Kind: history.Campaign, Target: "e", Client: 3, Holder: "h4", Token: 11, Outcome: history.OK, Call: 60, Return: 70}
	v := wantStatus(t, history.History{Ops: append(ops, campaign), Watch: &history.Watch{Grants: full, Until: 11}}, CheckWatch, Fail)
	if !strings.Contains(v.Violations[0].Message, "t11") {
		t.Errorf("campaign: %+v", v)
	}
}
