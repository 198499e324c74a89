package lease

import (
	"fmt"
	"iter"
	"slices"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/fencer-io/fencer/coord/internal/fakeclock"
)

type expiry struct {
	lock  string
	token uint64
}

func newTestLeases() (*Timers, *fakeclock.Clock, chan expiry) {
	clock := fakeclock.New()
	fired := make(chan expiry, 16)
	l := New(clock, func(key Key, token uint64) { fired <- expiry{key.Name, token} })
	return l, clock, fired
}

func expectExpiry(t *testing.T, fired chan expiry, want expiry) {
	t.Helper()
	select {
	case got := <-fired:
		if got != want {
			t.Fatalf("expired %+v, want %+v", got, want)
		}
	case <-time.After(5 * time.Second):
		t.Fatalf("no expiry of %+v", want)
	}
}

// expectNoExpiry fails if any lease but those already seen to expire has
// been handed to expire. The hand-off runs on a goroutine, so the channel
// alone could miss one in flight; the expiring mark is set synchronously by
// the (fake) timer, so it cannot.
func expectNoExpiry(t *testing.T, l *Timers, fired chan expiry, expired ...string) {
	t.Helper()
	l.mu.Lock()
	var early *tracked
	l.leases.each(func(ls *tracked) {
		if ls.expiring && !slices.Contains(expired, ls.name) {
			early = ls
		}
	})
	l.mu.Unlock()
	if early != nil {
		t.Fatalf("lease of %s (token %d) expired early", early.name, early.token)
	}
	select {
	case got := <-fired:
		t.Fatalf("unexpected expiry %+v", got)
	default:
	}
}

func TestLeaseExpires(t *testing.T) {
	l, clock, fired := newTestLeases()
	l.Promote(0, holding())
	l.Track(k("a"), 5, time.Second)
	clock.Advance(999 * time.Millisecond)
	expectNoExpiry(t, l, fired)
	clock.Advance(time.Millisecond)
	expectExpiry(t, fired, expiry{"a", 5})
	if l.Renew(k("a"), 5) {
		t.Fatal("renewed an expiring lease")
	}
}

func TestRenewalPushesDeadline(t *testing.T) {
	l, clock, fired := newTestLeases()
	l.Promote(0, holding())
	l.Track(k("a"), 5, time.Second)
	clock.Advance(800 * time.Millisecond)
	if !l.Renew(k("a"), 5) {
		t.Fatal("renewal refused")
	}
	clock.Advance(800 * time.Millisecond) // 1.6 s after grant, 0.8 s after renewal
	expectNoExpiry(t, l, fired)
	if left, ok := l.Remaining(k("a"), 5); !ok || left != 200*time.Millisecond {
		t.Fatalf("remaining %v %v, want 200ms", left, ok)
	}
	if l.Renew(k("a"), 4) {
		t.Fatal("renewed with a superseded token")
	}
	clock.Advance(200 * time.Millisecond)
	expectExpiry(t, fired, expiry{"a", 5})
}

func TestPromotionRestartsLeasesAtFullTTL(t *testing.T) {
	l, clock, fired := newTestLeases()
	l.Promote(0, holding(grant{"a", 1000}, grant{"b", 3000}))
	clock.Advance(999 * time.Millisecond)
	expectNoExpiry(t, l, fired)
	clock.Advance(time.Millisecond)
	expectExpiry(t, fired, expiry{"a", 1})
	clock.Advance(2 * time.Second)
	expectExpiry(t, fired, expiry{"b", 2})
}

func TestPromotionExpiresInDeadlineOrder(t *testing.T) {
	l, clock, fired := newTestLeases()
	// Given longest first, so that the heap must be ordered, not just
	// appended to.
	var grants []grant
	for i := range 8 {
		grants = append(grants, grant{fmt.Sprintf("l%d", i), int64(8000 - 1000*i)})
	}
	l.Promote(0, holding(grants...))
	for i := 7; i >= 0; i-- {
		clock.Advance(time.Second)
		expectExpiry(t, fired, expiry{fmt.Sprintf("l%d", i), uint64(i + 1)})
	}
}

func TestDemotionDropsTimers(t *testing.T) {
	l, clock, fired := newTestLeases()
	l.Promote(0, holding(grant{"a", 1000}))
	l.Track(k("b"), 9, time.Second)
	l.Demote()
	if l.Len() != 0 || clock.Pending() != 0 {
		t.Fatalf("after demotion: %d leases, %d timers", l.Len(), clock.Pending())
	}
	l.Track(k("c"), 10, time.Second) // a follower tracks nothing
	clock.Advance(time.Hour)
	expectNoExpiry(t, l, fired)
	if l.Renew(k("a"), 1) {
		t.Fatal("a follower renewed")
	}
}

func TestForgetAndRetry(t *testing.T) {
	l, clock, fired := newTestLeases()
	l.Promote(0, holding())
	l.Track(k("a"), 5, time.Second)
	l.Forget(k("a"), 5)
	clock.Advance(2 * time.Second)
	expectNoExpiry(t, l, fired)

	l.Track(k("b"), 6, time.Second)
	clock.Advance(time.Second)
	expectExpiry(t, fired, expiry{"b", 6})
	l.Retry(k("b"), 6, 100*time.Millisecond) // the Expire proposal failed
	clock.Advance(100 * time.Millisecond)
	expectExpiry(t, fired, expiry{"b", 6})
}

func TestOlderGrantDoesNotReplaceNewer(t *testing.T) {
	l, clock, fired := newTestLeases()
	l.Promote(0, holding())
	l.Track(k("a"), 8, time.Second)
	l.Track(k("a"), 7, time.Hour)
	clock.Advance(time.Second)
	expectExpiry(t, fired, expiry{"a", 8})
}

// Many leases share one timer, and expire in deadline order whatever order
// they were granted and renewed in.
func TestManyLeasesShareOneTimer(t *testing.T) {
	clock := fakeclock.New()
	fired := make(chan expiry, 2000)
	l := New(clock, func(key Key, token uint64) { fired <- expiry{key.Name, token} })
	l.Promote(0, holding())
	for i := range 1000 {
		l.Track(k(fmt.Sprintf("l%d", i)), uint64(i+1), time.Duration(1000-i)*time.Millisecond+time.Second)
	}
	if n := clock.Pending(); n != 1 {
		t.Fatalf("%d timers pending for 1000 leases, want 1", n)
	}
	// l999 has the shortest TTL (1.001 s); renew it at 0.5 s so l998 goes first.
	clock.Advance(500 * time.Millisecond)
	if !l.Renew(k("l999"), 1000) {
		t.Fatal("renewal refused")
	}
	clock.Advance(502 * time.Millisecond) // t = 1.002 s
	expectExpiry(t, fired, expiry{"l998", 999})
	expectNoExpiry(t, l, fired, "l998")
	// Up to just before l999's renewed deadline, the leases granted with
	// deadlines 1.003 s … 1.500 s (l997 … l500) expire, and l999 does not.
	drain := func(n int) map[string]bool {
		got := map[string]bool{}
		for range n {
			select {
			case e := <-fired:
				got[e.lock] = true
			case <-time.After(5 * time.Second):
				t.Fatalf("only %d of %d expiries", len(got), n)
			}
		}
		return got
	}
	clock.Advance(498 * time.Millisecond) // t = 1.500 s
	if got := drain(498); got["l999"] {
		t.Fatal("a renewed lease expired at its old deadline")
	}
	clock.Advance(time.Millisecond) // t = 1.501 s: l999 and l499
	if got := drain(2); !got["l999"] || !got["l499"] {
		t.Fatalf("expired %v, want l999 and l499", got)
	}
	if l.Len() != 1000 {
		t.Fatalf("expiring leases stay tracked until forgotten: %d", l.Len())
	}
}

// 100,000 leases are tracked on the leader: a lease must stay 64 bytes.
func TestLeaseIsSmall(t *testing.T) {
	if size := unsafe.Sizeof(tracked{}); size > 64 {
		t.Fatalf("lease is %d bytes", size)
	}
}

// Promote times every lease at its full length from now, however old its
// grant.
func TestPromoteTimesEveryLeaseInFull(t *testing.T) {
	l, clock, fired := newTestLeases()
	clock.Advance(time.Hour) // the grants' age does not matter
	l.Promote(0, holding(grant{"l0", 1000}, grant{"l1", 3000}))
	if l.Len() != 2 {
		t.Fatalf("tracking %d", l.Len())
	}
	if rem, ok := l.Remaining(k("l1"), 2); !ok || rem != 3*time.Second {
		t.Fatalf("l1 remaining %v %v", rem, ok)
	}
	clock.Advance(time.Second)
	expectExpiry(t, fired, expiry{"l0", 1})
	clock.Advance(2 * time.Second)
	expectExpiry(t, fired, expiry{"l1", 2})
}

// k is the key of lock name's lease, as coord keys it.
func k(name string) Key { return Key{Name: name} }

type grant struct {
	lock string
	ttl  int64 // ms
}

// holding returns the leases of grants made in order at index 1, 2, … (so
// with that token).
func holding(grants ...grant) iter.Seq[Lease] {
	var leases []Lease
	for i, g := range grants {
		leases = append(leases, Lease{Key: k(g.lock), Token: uint64(i + 1), TTL: time.Duration(g.ttl) * time.Millisecond})
	}
	return slices.Values(leases)
}

// Keys of one name that differ in kind or id are timed apart: a lock's
// lease, its lock-delay and two permits of a semaphore of the same name
// each expire on their own, and forgetting one leaves the others.
func TestKeysOfOneNameAreTimedApart(t *testing.T) {
	l, clock, fired := newTestLeases()
	l.Promote(0, holding())
	keys := []Key{{Name: "x"}, {Kind: 2, Name: "x"}, {Kind: 1, Name: "x", ID: 7}, {Kind: 1, Name: "x", ID: 8}}
	for i, key := range keys {
		l.Track(key, uint64(7+i), time.Duration(i+1)*time.Second)
	}
	if l.Len() != 4 {
		t.Fatalf("tracking %d, want 4", l.Len())
	}
	l.Forget(keys[2], 9)
	for i, key := range keys {
		_, ok := l.Remaining(key, uint64(7+i))
		if ok == (i == 2) {
			t.Fatalf("key %+v tracked %v after forgetting only %+v", key, ok, keys[2])
		}
	}
	clock.Advance(time.Second)
	expectExpiry(t, fired, expiry{"x", 7})
	clock.Advance(time.Second)
	expectExpiry(t, fired, expiry{"x", 8})
	clock.Advance(2 * time.Second)
	expectExpiry(t, fired, expiry{"x", 10})
	if l.Len() != 3 {
		t.Fatalf("tracking %d, want 3", l.Len())
	}
}

// An expiry is due only while its lease is the one that fired: tracked
// again (a grant's answer given again) or restarted by a new leader, it is
// not, and its proposer drops it; Restart never revives a lease whose
// expiry is under way, and times one that is not from now (fails with Due
// true for a re-tracked lease, or Restart re-tracking an expiring one).
func TestDueAndRestart(t *testing.T) {
	l, clock, fired := newTestLeases()
	l.Promote(0, holding())
	l.Track(k("a"), 5, time.Second)
	if l.Due(k("a"), 5) {
		t.Fatal("due before its deadline")
	}
	clock.Advance(time.Second)
	expectExpiry(t, fired, expiry{"a", 5})
	if !l.Due(k("a"), 5) || l.Due(k("a"), 4) {
		t.Fatal("the fired lease is not due, or another token is")
	}
	if l.Restart(k("a"), 5, time.Second) || !l.Due(k("a"), 5) {
		t.Fatal("Restart revived a lease whose expiry is under way")
	}
	l.Track(k("a"), 5, time.Second) // the grant's answer given again
	if l.Due(k("a"), 5) {
		t.Fatal("a lease tracked again after it fired is still due")
	}
	if !l.Restart(k("b"), 7, time.Second) {
		t.Fatal("Restart refused a lease nobody tracks")
	}
	clock.Advance(999 * time.Millisecond)
	expectNoExpiry(t, l, fired)
	clock.Advance(time.Millisecond)
	got := []expiry{<-fired, <-fired}
	slices.SortFunc(got, func(x, y expiry) int { return strings.Compare(x.lock, y.lock) })
	if got[0] != (expiry{"a", 5}) || got[1] != (expiry{"b", 7}) {
		t.Fatalf("expired %+v, want a and b a second after they were tracked", got)
	}
	l.Promote(0, holding(grant{"a", 1000})) // token 1
	if l.Due(k("a"), 1) {
		t.Fatal("a lease a new leader restarted is still due")
	}
}
