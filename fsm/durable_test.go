package fsm

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"runtime"
	"testing"
	"time"

	"github.com/fencer-io/fencer/fsm/entry"
	"github.com/fencer-io/fencer/fsm/event"
	"github.com/fencer-io/fencer/fsm/refusal"
)

// durableAcquire is holder's durable acquire of lock, request id r-holder.
func durableAcquire(lock, holder string) *entry.Acquire {
	return &entry.Acquire{Lock: lock, Holder: holder, Lease: "l-" + holder, TTLMillis: 1000, RequestID: "r-" + holder, Principal: "p-" + holder}
}

func (l *entryLog) enqueue(c *entry.Acquire) entry.Waiter {
	l.t.Helper()
	r, ok := l.apply(&entry.Enqueue{Acquire: c, WaitMillis: 5000}).(*EnqueueResult)
	if !ok || r.Existing || r.Waiter.Index != l.index {
		l.t.Fatalf("enqueue of %s at %d: %+v", c.Holder, l.index, r)
	}
	return r.Waiter
}

// Durable waiters are kept per name in log order; the grant that answers
// one's request id (here the hand-offs of two releases) takes it out and
// carries its Enqueue's index, also when the grant is asked for again; an
// Enqueue of a queued request is answered with its first place; a Dequeue
// takes a waiter out once, with its event, and a malformed Enqueue is
// refused.
func TestDurableWaitersKeepLogOrder(t *testing.T) {
	l := newEntryLog(t)
	rec := &recorder{}
	l.f.Observe(rec)
	held := l.grantLock("a", "holder")
	w1, w2 := l.enqueue(durableAcquire("a", "w1")), l.enqueue(durableAcquire("a", "w2"))
	rec.events = nil
	w3 := l.enqueue(durableAcquire("a", "w3"))
	if ev := rec.events; len(ev) != 1 || ev[0].Type != event.Queued || ev[0].Lock != "a" || ev[0].Holder != "w3" || ev[0].WaitIndex != w3.Index {
		t.Fatalf("events of the last enqueue: %+v", ev)
	}
	if again := l.apply(&entry.Enqueue{Acquire: durableAcquire("a", "w2"), WaitMillis: 5000}).(*EnqueueResult); !again.Existing || again.Waiter.Index != w2.Index {
		t.Fatalf("w2 asked again: %+v", again)
	}
	got := l.f.DurableWaiters()
	if len(got) != 3 || got[0].Index != w1.Index || got[1].Index != w2.Index || got[2].Index != w3.Index || got[0].Principal != "p-w1" {
		t.Fatalf("durable waiters %+v", got)
	}
	r := l.apply(&entry.Release{Lock: "a", Token: held.Token, Lease: "s-holder", Next: durableAcquire("a", "w1")}).(*ReleaseResult)
	if r.Next == nil || r.Next.WaitIndex != w1.Index || l.f.DurableCount() != 2 {
		t.Fatalf("w1's hand-off %+v, %d left", r.Next, l.f.DurableCount())
	}
	if back := l.apply(durableAcquire("a", "w1")).(*AcquireResult); !back.Existing || back.Grant.WaitIndex != w1.Index {
		t.Fatalf("w1's grant asked again: %+v", back)
	}
	rec.events = nil
	if d, ok := l.apply(&entry.Dequeue{Lock: "a", Index: w2.Index}).(*DequeueResult); !ok || d.Waiter.Holder() != "w2" {
		t.Fatalf("dequeue of w2: %v", l.apply(&entry.Dequeue{Lock: "a", Index: w2.Index}))
	}
	if ev := rec.events; len(ev) != 1 || ev[0].Type != event.Dequeued || ev[0].WaitIndex != w2.Index {
		t.Fatalf("events of the dequeue: %+v", ev)
	}
	if err, _ := l.apply(&entry.Dequeue{Lock: "a", Index: w2.Index}).(error); !errors.Is(err, refusal.ErrLeaseLost) {
		t.Fatalf("a second dequeue: %v", err)
	}
	r = l.apply(&entry.Release{Lock: "a", Token: r.Next.Token, Lease: "l-w1", Next: durableAcquire("a", "w3")}).(*ReleaseResult)
	if r.Next == nil || r.Next.WaitIndex != w3.Index || l.f.DurableCount() != 0 {
		t.Fatalf("w3's hand-off %+v, %d left", r.Next, l.f.DurableCount())
	}
	if plain := l.grantLock("b", "x"); plain.WaitIndex != 0 {
		t.Fatalf("a grant to no durable waiter has wait index %d", plain.WaitIndex)
	}
	for _, bad := range []*entry.Enqueue{{WaitMillis: 1}, {Acquire: acquire("a", "x", "s"), WaitMillis: 1},
		{Acquire: durableAcquire("a", "x"), Permit: semAcquire("x", 1), WaitMillis: 1}, {Acquire: durableAcquire("a", "x")}} {
		if err, _ := l.apply(bad).(error); !errors.Is(err, entry.ErrMalformedCommand) {
			t.Errorf("enqueue %+v: %v", bad, err)
		}
	}
}

// A semaphore's durable waiter leaves its FIFO with its permit, which
// carries its Enqueue's index until it ends; a lock's waiter of the same
// name is apart.
func TestDurablePermitWaiter(t *testing.T) {
	l := newEntryLog(t)
	p := l.permit("s", "holder", 1)
	w := l.apply(&entry.Enqueue{Permit: semAcquire("w", 1), WaitMillis: 100}).(*EnqueueResult).Waiter
	lw := l.enqueue(durableAcquire("s", "lockwaiter"))
	r := l.apply(&entry.SemRelease{Semaphore: "s", Token: p.Token, Lease: "l-holder", Next: semAcquire("w", 1)}).(*SemReleaseResult)
	if r.Next == nil || r.Next.Permit.WaitIndex != w.Index {
		t.Fatalf("the waiter's permit %+v", r.Next)
	}
	if got := l.f.DurableWaiters(); len(got) != 1 || got[0].Index != lw.Index {
		t.Fatalf("left %+v", got)
	}
	if back := l.apply(semAcquire("w", 1)).(*PermitResult); !back.Existing || back.Permit.WaitIndex != w.Index {
		t.Fatalf("the permit asked again %+v", back)
	}
	l.apply(&entry.SemExpire{Semaphore: "s", Token: r.Next.Permit.Token})
	if len(l.f.s.waited) != 0 {
		t.Fatalf("an ended permit's wait index is kept: %v", l.f.s.waited)
	}
}

// goldenV7 is the state behind testdata/snapshot-v7-durable.golden: a
// held lock with two durable waiters queued (one of them shared, under an
// ACL principal), a lock granted to a durable waiter, and a semaphore's
// durable waiter.
func goldenV7(t *testing.T) *FSM {
	l := newEntryLog(t)
	l.apply(&entry.SetClusterID{ID: "c7"})
	l.grantLock("a", "holder")
	l.enqueue(durableAcquire("a", "w1"))
	shared := durableAcquire("a", "w2")
	shared.Mode = entry.ModeShared
	l.enqueue(shared)
	b := l.grantLock("b", "first")
	l.enqueue(durableAcquire("b", "next"))
	l.apply(&entry.Release{Lock: "b", Token: b.Token, Lease: "s-first", Next: durableAcquire("b", "next")})
	l.permit("pool", "p", 1)
	l.apply(&entry.Enqueue{Permit: semAcquire("pw", 1), WaitMillis: 700})
	return l.f
}

// A version-7 snapshot with durable waiters restores to the same state
// and is written byte for byte, keeping each name's order and the waited
// grant's index; a name's waiters out of log order and a waited grant
// that is not held are refused. FENCER_WRITE_GOLDEN=1 rewrites the file.
func TestSnapshotV7DurableGolden(t *testing.T) {
	f := goldenV7(t)
	golden, g := checkGolden(t, f, "snapshot-v7-durable", `"version":7,`, `"durable_waiters":3`, `"waited":1`, `{"durable_waiter":`, `{"waited":{`, `"principal":"p-w2"`)
	if w := g.DurableWaiters(); len(w) != 3 || w[0].Holder() != "w1" || w[1].Holder() != "w2" || w[1].Acquire.Principal != "p-w2" {
		t.Fatalf("restored waiters %+v", w)
	}
	if lk, _ := g.Lock("b"); lk.WaitIndex == 0 {
		t.Fatal("the restored grant forgot where it queued")
	}
	roundTrip(t, f)
	lines := bytes.Split(golden, []byte("\n"))
	var w1, w2 []byte
	for _, line := range lines {
		if bytes.Contains(line, []byte(`"holder":"w1"`)) && bytes.Contains(line, []byte("durable_waiter")) {
			w1 = line
		}
		if bytes.Contains(line, []byte(`"holder":"w2"`)) && bytes.Contains(line, []byte("durable_waiter")) {
			w2 = line
		}
	}
	swapped := bytes.Replace(bytes.Replace(golden, w1, []byte("W1"), 1), w2, w1, 1)
	swapped = bytes.Replace(swapped, []byte("W1"), w2, 1)
	for name, bad := range map[string][]byte{
		"waiters out of order": swapped,
		"a waited grant freed": bytes.Replace(golden, []byte(`{"waited":{"token":`), []byte(`{"waited":{"token":1`), 1),
	} {
		if bytes.Equal(bad, golden) {
			t.Fatalf("%s: the golden was not changed", name)
		}
		if err := New(nil).Restore(io.NopCloser(bytes.NewReader(bad))); err == nil {
			t.Errorf("%s: restored", name)
		}
	}
}

// BenchmarkDurableWaiters measures what 100,000 durable waiters cost the
// state (heap bytes per waiter, by the heap's growth as they are
// enqueued, all on 1,000 held locks), and a snapshot (bytes per waiter,
// and the time to write and restore it).
func BenchmarkDurableWaiters(b *testing.B) {
	const locks, waiters = 1_000, 100_000
	for range b.N {
		f := New(nil)
		index := uint64(0)
		for i := range locks {
			index++
			f.ApplyCommand(&entry.Acquire{Lock: fmt.Sprintf("bench/lock-%06d", i), Holder: "holder", Lease: fmt.Sprintf("%032x", i),
				TTLMillis: 10_000, RequestID: fmt.Sprintf("req-%016x", i)}, index)
		}
		var empty bytes.Buffer
		f.View().WriteTo(&empty)
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		for i := range waiters {
			index++
			// A waiter as the leader enqueues it: a decoded entry, with the
			// secret and request id the API draws (32 hex digits each).
			data, _ := entry.Encode(&entry.Enqueue{Acquire: &entry.Acquire{Lock: fmt.Sprintf("bench/lock-%06d", i%locks),
				Holder: fmt.Sprintf("bench-h-%d", i%64), Lease: fmt.Sprintf("%032x", i), TTLMillis: 10_000,
				RequestID: fmt.Sprintf("%032x", i), NowMillis: 1_700_000_000_000}, WaitMillis: 30_000})
			applyEntry(f, index, data)
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		var buf bytes.Buffer
		start := time.Now()
		f.View().WriteTo(&buf)
		write := time.Since(start)
		start = time.Now()
		if err := New(nil).Restore(io.NopCloser(bytes.NewReader(buf.Bytes()))); err != nil {
			b.Fatal(err)
		}
		restore := time.Since(start)
		if f.DurableCount() != waiters {
			b.Fatalf("%d durable waiters", f.DurableCount())
		}
		b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/waiters, "heap-B/waiter")
		b.ReportMetric(float64(buf.Len()-empty.Len())/waiters, "snapshot-B/waiter")
		b.ReportMetric(write.Seconds(), "write-s")
		b.ReportMetric(restore.Seconds(), "restore-s")
		runtime.KeepAlive(f)
	}
}
