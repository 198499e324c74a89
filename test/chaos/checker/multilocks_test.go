package checker

import (
	"slices"
	"strings"
	"testing"

	"github.com/fencer-io/fencer/api/wire"
	"github.com/fencer-io/fencer/test/chaos/history"
)

// A multi-lock's history: client 0 takes multi.a and multi.b with token 10
// (granted at index 10), writes bound to multi.a at index 11, and the
// grant ends at index 15 (end). Watched through index 30.
func multiHistory(end ...history.WatchedEvent) history.History {
	h := history.History{
		Ops: []history.Op{
			{Kind: history.MultiAcquire, Target: "multi.a,multi.b", Names: []string{"multi.a", "multi.b"}, Holder: "c0", TTL: 1000,
				Token: 10, Outcome: history.OK, Call: 1, Return: 2},
			boundPut(0, "multi.a", 10, history.OK, 3, 4),
			{Kind: history.MultiRelease, Target: "multi.a,multi.b", Names: []string{"multi.a", "multi.b"}, Token: 10, Outcome: history.OK, Call: 5, Return: 6},
		},
		Watch: &history.Watch{
			Grants: []history.WatchedGrant{
				{Index: 10, Type: wire.EventAcquired, Lock: "multi.a", Token: 10},
				{Index: 10, Type: wire.EventAcquired, Lock: "multi.b", Token: 10},
			},
			Until: 30,
		},
	}
	h.Watch.Events = append([]history.WatchedEvent{{Index: 11, Type: wire.EventPut, Key: "kv.multi.a", Token: 10}}, end...)
	return h
}

func TestMultiGrantsPass(t *testing.T) {
	h := multiHistory(ev(15, wire.EventReleased, "multi.a", 10), ev(15, wire.EventReleased, "multi.b", 10))
	wantStatus(t, h, CheckMultiGrants, Pass)
	// A waiting multi-grant over multi.b granted once the first ended.
	next := h
	next.Ops = append(slices.Clone(h.Ops), history.Op{Kind: history.MultiAcquire, Target: "multi.b,multi.c", Names: []string{"multi.b", "multi.c"},
		Holder: "c1", TTL: 1000, Token: 16, Outcome: history.OK, Call: 1, Return: 7})
	w := *h.Watch
	w.Grants = append(slices.Clone(w.Grants),
		history.WatchedGrant{Index: 16, Type: wire.EventAcquired, Lock: "multi.b", Token: 16},
		history.WatchedGrant{Index: 16, Type: wire.EventAcquired, Lock: "multi.c", Token: 16})
	next.Watch = &w
	wantStatus(t, next, CheckMultiGrants, Pass)
	// One token on two locks in one entry is not a grant reported twice.
	wantStatus(t, h, CheckWatch, Pass)
	wantStatus(t, history.History{Ops: h.Ops}, CheckMultiGrants, Skipped)
}

// Each rule fails on a history that breaks it.
func TestMultiGrantsFail(t *testing.T) {
	for _, c := range []struct {
		name string
		h    history.History
		want string
	}{
		{"names end apart", multiHistory(ev(15, wire.EventReleased, "multi.a", 10), ev(16, wire.EventExpired, "multi.b", 10)), "not in one entry"},
		{"one name never ends", multiHistory(ev(15, wire.EventReleased, "multi.a", 10)), "multi.b did not end"},
		{"a name ends twice", multiHistory(ev(15, wire.EventReleased, "multi.a", 10), ev(15, wire.EventReleased, "multi.a", 10), ev(15, wire.EventReleased, "multi.b", 10)), "ended twice"},
		{"a write after the end", func() history.History {
			h := multiHistory(ev(15, wire.EventExpired, "multi.a", 10), ev(15, wire.EventExpired, "multi.b", 10))
			h.Watch.Events = append(h.Watch.Events, history.WatchedEvent{Index: 17, Type: wire.EventPut, Key: "kv.multi.b", Token: 10})
			return h
		}(), "accepted at index 17"},
		{"a name granted with another token", func() history.History {
			h := multiHistory(ev(15, wire.EventReleased, "multi.a", 10), ev(15, wire.EventReleased, "multi.b", 10))
			h.Watch.Grants[1] = history.WatchedGrant{Index: 11, Type: wire.EventAcquired, Lock: "multi.b", Token: 11}
			return h
		}(), "asked for [multi.a multi.b], the stream grants [multi.a]"},
		{"a name granted at another index", func() history.History {
			h := multiHistory(ev(15, wire.EventReleased, "multi.a", 10), ev(15, wire.EventReleased, "multi.b", 10))
			h.Watch.Grants = append(h.Watch.Grants, history.WatchedGrant{Index: 12, Type: wire.EventAcquired, Lock: "multi.c", Token: 10})
			return h
		}(), "multi.c granted at index 12"},
		{"two multi-grants hold a name at once", func() history.History {
			h := multiHistory(ev(15, wire.EventReleased, "multi.a", 10), ev(15, wire.EventReleased, "multi.b", 10))
			h.Ops = append(h.Ops, history.Op{Kind: history.MultiAcquire, Target: "multi.b,multi.c", Names: []string{"multi.b", "multi.c"}, Holder: "c1",
				TTL: 1000, Token: 12, Outcome: history.OK, Call: 1, Return: 7})
			h.Watch.Grants = append(h.Watch.Grants,
				history.WatchedGrant{Index: 12, Type: wire.EventAcquired, Lock: "multi.b", Token: 12},
				history.WatchedGrant{Index: 12, Type: wire.EventAcquired, Lock: "multi.c", Token: 12})
			return h
		}(), "multi.b granted to multi-grant t12 at index 12 while multi-grant t10 held it"},
	} {
		t.Run(c.name, func(t *testing.T) {
			v := wantStatus(t, c.h, CheckMultiGrants, Fail)
			found := false
			for _, vi := range v.Violations {
				found = found || strings.Contains(vi.Message, c.want)
			}
			if !found {
				t.Fatalf("no violation says %q: %+v", c.want, v.Violations)
			}
			wantEvidence(t, v, "multi_acquire")
		})
	}
}
