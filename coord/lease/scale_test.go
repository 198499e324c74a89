package lease

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/fencer-io/fencer/coord/internal/fakeclock"
)

// million is a leader's lease count at the scale target (issue 31).
const million = 1_000_000

// lockNames returns n lock names as the FSM holds them; they are made
// before any measurement, because the timers share the FSM's strings and
// do not own them.
func lockNames(n int) []string {
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("lock-%07d", i)
	}
	return names
}

// liveHeap is the heap in use, and the objects in it, after a collection.
func liveHeap() (bytes, objects uint64) {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc, m.HeapObjects
}

// measureTimers reports the live heap the timers that fill builds hold,
// per lease, its heap objects per lease, and how long one collection takes
// with them live (its marking is what a leader's collector repeats).
func measureTimers(b *testing.B, n int, fill func(*Timers)) {
	b.Helper()
	var perLease, objects float64
	var collection time.Duration
	for b.Loop() {
		before, beforeObjects := liveHeap()
		l := New(fakeclock.New(), func(Key, uint64) {})
		fill(l)
		after, afterObjects := liveHeap()
		if l.Len() != n {
			b.Fatalf("tracking %d, want %d", l.Len(), n)
		}
		perLease = float64(after-before) / float64(n)
		objects = (float64(afterObjects) - float64(beforeObjects)) / float64(n)
		start := time.Now()
		runtime.GC()
		collection = time.Since(start)
		runtime.KeepAlive(l)
	}
	b.ReportMetric(perLease, "heapB/lease")
	b.ReportMetric(objects, "objects/lease")
	b.ReportMetric(float64(collection.Microseconds())/1000, "gc-ms")
}

// BenchmarkTrackMillion tracks a million lock leases one grant at a time,
// as a leader does while they are acquired: ns/op is the whole million.
func BenchmarkTrackMillion(b *testing.B) {
	names := lockNames(million)
	measureTimers(b, million, func(l *Timers) {
		l.Promote(0, slices.Values([]Lease(nil)))
		for i, name := range names {
			l.Track(Key{Name: name}, uint64(i+1), 2*time.Hour)
		}
	})
}

// BenchmarkPromoteMillion restarts a million lock leases on a new leader.
func BenchmarkPromoteMillion(b *testing.B) {
	names := lockNames(million)
	leases := make([]Lease, million)
	for i, name := range names {
		leases[i] = Lease{Key: Key{Name: name}, Token: uint64(i + 1), TTL: 2 * time.Hour}
	}
	measureTimers(b, million, func(l *Timers) { l.Promote(million, slices.Values(leases)) })
}

// heldMillion returns timers holding a million lock leases (token i+1 for
// names[i]) and more extra ones after them.
func heldMillion(b *testing.B, extra int) (*Timers, []string) {
	b.Helper()
	names := lockNames(million + extra)
	l := New(fakeclock.New(), func(Key, uint64) {})
	l.Promote(0, slices.Values([]Lease(nil)))
	for i, name := range names {
		l.Track(Key{Name: name}, uint64(i+1), 2*time.Hour)
	}
	return l, names
}

// BenchmarkTrack times a new grant of a held name at a million held (its
// earlier grant's deadline is replaced).
func BenchmarkTrack(b *testing.B) {
	l, names := heldMillion(b, 0)
	token := uint64(million)
	b.ResetTimer()
	for i := range b.N {
		token++
		l.Track(Key{Name: names[i%million]}, token, 2*time.Hour)
	}
}

// BenchmarkRenew times a renewal at a million held.
func BenchmarkRenew(b *testing.B) {
	l, names := heldMillion(b, 0)
	b.ResetTimer()
	for i := range b.N {
		if !l.Renew(Key{Name: names[i%million]}, uint64(i%million+1)) {
			b.Fatal("renewal refused")
		}
	}
}

// BenchmarkForget times a release's Forget at a million held or more.
func BenchmarkForget(b *testing.B) {
	l, names := heldMillion(b, b.N)
	b.ResetTimer()
	for i := range b.N {
		l.Forget(Key{Name: names[i]}, uint64(i+1))
	}
	b.StopTimer()
	if l.Len() != million {
		b.Fatalf("tracking %d after forgetting %d", l.Len(), b.N)
	}
}

// The slab and its index agree with a map through tracks, renewals and
// forgets in any order: every key tracked is found with its own token
// and deadline, every key forgotten is gone (a probe run broken by a
// removal would lose keys behind it), and freed slots are reused.
func TestLeaseTableAgreesWithAMap(t *testing.T) {
	l, clock, _ := newTestLeases()
	l.Promote(0, holding())
	rng := rand.New(rand.NewPCG(1, 31))
	want := map[Key]uint64{}
	keys := make([]Key, 5000)
	for i := range keys {
		keys[i] = Key{Kind: Kind(i % 3), Name: fmt.Sprintf("n%d", i%1700), ID: uint64(i % 2)}
	}
	for token := uint64(1); token <= 60_000; token++ {
		key := keys[rng.IntN(len(keys))]
		if old, ok := want[key]; ok && rng.IntN(2) == 0 {
			l.Forget(key, old)
			delete(want, key)
			continue
		}
		l.Track(key, token, time.Duration(token)*time.Millisecond+time.Hour)
		want[key] = token
	}
	if l.Len() != len(want) {
		t.Fatalf("tracking %d, want %d", l.Len(), len(want))
	}
	now := clock.Now().Sub(l.base)
	for _, key := range keys {
		token, held := want[key]
		left, ok := l.Remaining(key, token)
		if ok != held || held && left != time.Duration(token)*time.Millisecond+time.Hour-now {
			t.Fatalf("%+v: remaining %v %v, want held %v with token %d", key, left, ok, held, token)
		}
	}
	if used := int(l.leases.used); used > len(keys) {
		t.Fatalf("%d slots handed out for at most %d keys at once", used, len(keys))
	}
}

// A held lease costs the leader its 64-byte record and a few bytes of
// index and heap, in a handful of large allocations: 100 bytes at most at
// 100,000 leases (about 129 with an object, a map entry and a heap pointer
// each, before issue 31).
func TestHeldLeasesArePacked(t *testing.T) {
	const n = 100_000
	names := lockNames(n)
	before, beforeObjects := liveHeap()
	l := New(fakeclock.New(), func(Key, uint64) {})
	l.Promote(0, slices.Values([]Lease(nil)))
	for i, name := range names {
		l.Track(Key{Name: name}, uint64(i+1), 2*time.Hour)
	}
	after, afterObjects := liveHeap()
	perLease := float64(after-before) / n
	objects := int64(afterObjects) - int64(beforeObjects)
	if perLease > 100 || objects > n/100 {
		t.Fatalf("%d leases hold %.1f heap bytes each in %d objects", n, perLease, objects)
	}
	t.Logf("%d leases hold %.1f heap bytes each in %d objects", n, perLease, objects)
	runtime.KeepAlive(l)
	runtime.KeepAlive(names) // the FSM keeps them: not freed inside the measure
}

// An expiry hands over the key and token its lease had when it fired,
// though the lease is forgotten and its slot given to another before the
// expire call runs (a release that raced the expiry, then a new grant).
func TestExpiryKeepsItsKeyWhenItsSlotIsReused(t *testing.T) {
	clock := fakeclock.New()
	gate := make(chan struct{})
	fired := make(chan expiry, 1)
	l := New(clock, func(key Key, token uint64) {
		<-gate
		fired <- expiry{key.Name, token}
	})
	l.Promote(0, holding())
	l.Track(k("a"), 5, time.Second)
	clock.Advance(time.Second) // fires; expire waits at the gate
	l.Forget(k("a"), 5)
	l.Track(k("b"), 6, time.Hour) // takes a's freed slot
	if used := l.leases.used; used != 1 {
		t.Fatalf("%d slots handed out, want b in a's", used)
	}
	close(gate)
	expectExpiry(t, fired, expiry{"a", 5})
}
