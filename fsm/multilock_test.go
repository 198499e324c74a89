package fsm

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/fencer-io/fencer/fsm/entry"
	"github.com/fencer-io/fencer/fsm/event"
	"github.com/fencer-io/fencer/fsm/refusal"
)

func multiAcquire(holder, secret string, names ...string) *entry.MultiAcquire {
	return &entry.MultiAcquire{Names: names, Holder: holder, Lease: secret, TTLMillis: 1000, RequestID: "r-" + holder}
}

// A multi-acquire grants every name or none, in one entry: each name holds
// a lock grant with the entry's token and the one secret, a fenced write
// under any of them is admitted, a second multi-acquire that meets one
// held name gets none (refused naming the first held name), and one name
// cannot be released or expired alone.
func TestMultiAcquireGrantsAllOrNone(t *testing.T) {
	l := newEntryLog(t)
	l.settings(entry.GrantHistorySettings{PerLock: 4, Global: 16})
	r, ok := l.apply(multiAcquire("w", "s1", "a", "b", "c")).(*MultiResult)
	if !ok || r.Grant.Token != l.index || len(r.Grant.Names) != 3 {
		t.Fatalf("multi-acquire: %+v", r)
	}
	for _, n := range []string{"a", "b", "c"} {
		lk, held := l.f.Lock(n)
		if !held || lk.Token != r.Grant.Token || lk.Lease != "s1" || lk.Holder != "w" {
			t.Fatalf("lock %s after the multi-acquire: %+v held %v", n, lk, held)
		}
	}
	before := l.f.Digest()
	err, _ := l.apply(multiAcquire("v", "s2", "x", "c", "b")).(error)
	var held *refusal.HeldError
	if !errors.As(err, &held) || held.Lock != "c" || held.Token != r.Grant.Token {
		t.Fatalf("overlapping multi-acquire: %v, want lock_held naming c", err)
	}
	if _, got := l.f.Lock("x"); got || l.f.Digest() != before {
		t.Fatal("a refused multi-acquire changed the state")
	}
	if err, _ := l.apply(&entry.Release{Lock: "b", Token: r.Grant.Token, Lease: "s1"}).(error); !errors.Is(err, refusal.ErrMultiGrant) {
		t.Fatalf("release of one name: %v", err)
	}
	if err, _ := l.apply(&entry.Expire{Lock: "b", Token: r.Grant.Token}).(error); !errors.Is(err, refusal.ErrMultiGrant) {
		t.Fatalf("expiry of one name: %v", err)
	}
	if _, ok := l.apply(&entry.Put{Key: "k", Value: []byte("v"), Token: r.Grant.Token, Lock: "c"}).(*PutResult); !ok {
		t.Fatal("fenced put under a multi-grant's name refused")
	}
	if g, ok := l.f.MultiGrant(r.Grant.Token); !ok || g.Lease != "s1" || strings.Join(g.Names, ",") != "a,b,c" {
		t.Fatalf("MultiGrant: %+v %v", g, ok)
	}
	if rec, how := l.lookup(r.Grant.Token); how != TokenFound || rec.Lock != "a" || rec.Ended != "" {
		t.Fatalf("token lookup: %+v %v", rec, how)
	}
}

// A multi-release ends every name in one entry, with the grant's secret
// only; a retried multi-acquire gets its grant back while it lives and
// never a second one after.
func TestMultiReleaseEndsEveryNameAtOneIndex(t *testing.T) {
	l := newEntryLog(t)
	l.settings(entry.GrantHistorySettings{PerLock: 4, Global: 16})
	rec := &recorder{}
	l.f.Observe(rec)
	cmd := multiAcquire("w", "s1", "b", "a")
	g := l.apply(cmd).(*MultiResult).Grant
	if again, ok := l.apply(cmd).(*MultiResult); !ok || !again.Existing || again.Grant.Token != g.Token {
		t.Fatalf("retried multi-acquire: %+v", again)
	}
	if err, _ := l.apply(&entry.MultiRelease{Token: g.Token, Lease: "guess"}).(error); !errors.Is(err, refusal.ErrLeaseLost) {
		t.Fatalf("multi-release with a wrong secret: %v", err)
	}
	res, ok := l.apply(&entry.MultiRelease{Token: g.Token, Lease: "s1"}).(*MultiReleaseResult)
	if !ok || len(res.Locks) != 2 {
		t.Fatalf("multi-release: %+v", res)
	}
	end := l.index
	for _, n := range []string{"a", "b"} {
		if _, held := l.f.Lock(n); held {
			t.Fatalf("lock %s still held", n)
		}
	}
	if l.f.IsMulti(g.Token) {
		t.Fatal("the multi-grant is still live")
	}
	if err, _ := l.apply(cmd).(error); !errors.Is(err, refusal.ErrLeaseLost) {
		t.Fatalf("multi-acquire retried after its release: %v", err)
	}
	if r, _ := l.lookup(g.Token); r.Ended != entry.EndReleased || r.EndedIndex != end {
		t.Fatalf("history after the release: %+v", r)
	}
	var got []string
	for _, e := range rec.events {
		if e.Token == g.Token {
			got = append(got, e.Type+":"+e.Lock)
			if e.Type == event.Released && e.Index != end {
				t.Errorf("release event at %d, want %d", e.Index, end)
			}
		}
	}
	if strings.Join(got, " ") != "acquired:b acquired:a released:b released:a" {
		t.Fatalf("events: %v", got)
	}
	if _, ok := l.apply(&entry.MultiRelease{Token: g.Token, Expired: true}).(error); !ok {
		t.Fatal("expiry of an ended multi-grant applied")
	}
}

// Names are checked in the FSM too: none, too many, empty or twice is a
// malformed command, and a name in its lock-delay refuses the whole grant.
func TestMultiAcquireRefusesBadNamesAndDelays(t *testing.T) {
	l := newEntryLog(t)
	many := make([]string, entry.MaxMultiNames+1)
	for i := range many {
		many[i] = strings.Repeat("n", i+1)
	}
	for _, names := range [][]string{nil, {"a", "a"}, {"a", ""}, many} {
		if err, _ := l.apply(multiAcquire("w", "s", names...)).(error); !errors.Is(err, entry.ErrMalformedCommand) {
			t.Errorf("names %q: %v", names, err)
		}
	}
	lk := l.apply(&entry.Acquire{Lock: "d", Holder: "o", Lease: "x", TTLMillis: 10, LockDelayMillis: 500}).(*AcquireResult).Grant
	l.apply(&entry.Expire{Lock: "d", Token: lk.Token})
	if err, _ := l.apply(multiAcquire("w", "s", "a", "d")).(error); !errors.Is(err, refusal.ErrLockDelay) {
		t.Fatalf("a name in its lock-delay: %v", err)
	}
	if _, held := l.f.Lock("a"); held {
		t.Fatal("lock a granted by a refused multi-acquire")
	}
}

// goldenV6Multi is the state behind testdata/snapshot-v6-multi.golden: a
// live multi-grant, one released, and a lock of its own beside them.
func goldenV6Multi(t *testing.T) *FSM {
	l := newEntryLog(t)
	l.apply(&entry.SetClusterID{ID: "c6"})
	l.settings(entry.GrantHistorySettings{PerLock: 3, Global: 16})
	gone := l.apply(multiAcquire("old", "s-old", "a", "b")).(*MultiResult).Grant
	l.apply(&entry.MultiRelease{Token: gone.Token, Lease: "s-old"})
	l.apply(multiAcquire("w", "s-w", "c", "a", "b"))
	l.grantLock("solo", "x")
	return l.f
}

// A version-6 snapshot with multi-grants restores to the same state, which
// writes it byte for byte; the restored grant ends as one. FENCER_WRITE_GOLDEN=1
// rewrites the file.
func TestSnapshotV6MultiGolden(t *testing.T) {
	f := goldenV6Multi(t)
	golden, g := checkGolden(t, f, "snapshot-v6-multi", `"version":6,`, `"multi_locks":1`, `"multi_lock":{"token":5,"names":["c","a","b"]}`)
	if err, _ := g.ApplyCommand(&entry.Release{Lock: "a", Token: 5, Lease: "s-w"}, 7).(error); !errors.Is(err, refusal.ErrMultiGrant) {
		t.Fatalf("release of one restored name: %v", err)
	}
	if r, ok := g.ApplyCommand(&entry.MultiRelease{Token: 5, Expired: true}, 8).(*MultiReleaseResult); !ok || len(r.Locks) != 3 {
		t.Fatalf("expiry of the restored multi-grant: %+v", r)
	}
	// A multi-grant whose name is not held by it is refused.
	bad := bytes.Replace(golden, []byte(`"names":["c","a","b"]`), []byte(`"names":["c","a","solo"]`), 1)
	if err := New(nil).Restore(io.NopCloser(bytes.NewReader(bad))); err == nil || !strings.Contains(err.Error(), "multi-grant") {
		t.Fatalf("restore of a multi-grant naming another's lock: %v", err)
	}
}
