package events

import (
	"context"
	"errors"
	"runtime"
	"testing"
	"time"

	"github.com/fencer-io/fencer/fsm/event"
)

// fill applies n entries of one event each, on locks l0 … l9.
func fill(h *History, from, n uint64) {
	for i := from; i < from+n; i++ {
		h.Applied(i, []event.Event{{Index: i, Type: event.Acquired, Lock: "l" + string(rune('0'+i%10)), Holder: "holder", Token: i}})
	}
}

// allocated returns the bytes f allocates.
func allocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// A watcher is a place in the one history, not a copy of it (issue 26,
// F1: each stream copied the whole kept history, ~200 B an event): a
// hundred watches from the oldest kept index, each reading a batch,
// allocate nothing like the history's size.
func TestWatchersShareTheHistory(t *testing.T) {
	h := New(Config{})
	fill(h, 1, 50_000)
	var watchers []*Watcher
	n := allocated(func() {
		for range 100 {
			w, err := h.Watch(0)
			if err != nil {
				t.Fatal(err)
			}
			if batch, _, err := w.Next(make([]event.Event, 0, 32)); err != nil || len(batch) != 32 || batch[0].Index != 1 {
				t.Fatalf("first batch: %d events, %v", len(batch), err)
			}
			watchers = append(watchers, w)
		}
	})
	// A copy of the history is 50,000 × ~200 B = 10 MB per watcher.
	if n > 4<<20 {
		t.Fatalf("100 watchers of a 50,000-event history allocated %d MB", n>>20)
	}
	runtime.KeepAlive(watchers)
}

// The lag bound counts what was applied after the watch began: a watcher
// reads a backlog of any length kept, but one that falls more than Lag
// events behind the log is cut off, and resumes from the last entry it
// read, which is still kept.
func TestWatcherLagged(t *testing.T) {
	h := New(Config{History: 1000, Lag: 10})
	fill(h, 1, 500)
	w, err := h.Watch(0)
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]event.Event, 0, 4)
	read := 0
	for {
		batch, more, err := w.Next(buf)
		if err != nil {
			t.Fatalf("reading a backlog of 500 with a lag of 10: %v after %d", err, read)
		}
		if more != nil {
			break
		}
		read += len(batch)
	}
	if read != 500 || w.Resume() != 500 {
		t.Fatalf("read %d events up to %d", read, w.Resume())
	}
	fill(h, 501, 10)
	if _, _, err := w.Next(buf); err != nil {
		t.Fatalf("10 behind with a lag of 10: %v", err)
	}
	fill(h, 511, 20) // 4 read above, 26 behind
	if _, _, err := w.Next(buf); !errors.Is(err, ErrLagged) || w.Resume() != 504 {
		t.Fatalf("26 behind with a lag of 10: %v, resume from %d", err, w.Resume())
	}
	again, err := h.Watch(int64(w.Resume()))
	if err != nil {
		t.Fatalf("resuming from %d: %v", w.Resume(), err)
	}
	if batch, _, err := again.Next(buf); err != nil || batch[0].Index != 505 {
		t.Fatalf("resumed: %v %v", batch, err)
	}
	// A restore that leaves a gap cuts every watcher off.
	h.Restored(2000, false, nil)
	if _, _, err := again.Next(buf); !errors.Is(err, ErrLagged) {
		t.Fatalf("after a restore past the history: %v", err)
	}
}

// Applying an entry costs the same with a thousand idle watchers as with
// none: it closes one channel, never a watcher's queue.
func TestApplyDoesNotVisitWatchers(t *testing.T) {
	h := New(Config{})
	for range 1000 {
		w, _ := h.Watch(-1)
		_, more, _ := w.Next(make([]event.Event, 0, 1))
		if more == nil {
			t.Fatal("an up-to-date watcher has nothing to wait on")
		}
	}
	n := allocated(func() { fill(h, 1, 1000) })
	// Each entry allocates its new channel (96 B) and the ring grows once.
	if n > 1000*200+minRing*300 {
		t.Fatalf("1,000 entries with 1,000 watchers allocated %d KB", n>>10)
	}
}

// A blocking read finds whether its lock changed after an old index by the
// lock's newest event, not by copying or reading the events after it
// (issue 26, F2: 11.5 ms of CPU per request with an old wait_index).
func TestWaitLockByIndex(t *testing.T) {
	h := New(Config{})
	fill(h, 1, 50_000)
	ctx := context.Background()
	n := allocated(func() {
		for range 100 {
			if changed, err := h.WaitLock(ctx, "l3", 0, time.Minute, nil, nil); !changed || err != nil {
				t.Fatalf("l3 changed after 0: %v %v", changed, err)
			}
		}
	})
	if n > 64<<10 {
		t.Fatalf("100 blocking reads from index 0 of a 50,000-event history allocated %d KB", n>>10)
	}
	// Parked on l3: another lock's entry does not wake it, l3's does.
	woke := make(chan bool, 1)
	go func() {
		changed, _ := h.WaitLock(ctx, "l3", 50_000, time.Minute, nil, nil)
		woke <- changed
	}()
	waitParked(t, h, "l3", 1)
	h.Applied(50_001, []event.Event{{Index: 50_001, Type: event.Acquired, Lock: "other"}})
	select {
	case <-woke:
		t.Fatal("woken by another lock")
	case <-time.After(50 * time.Millisecond):
	}
	h.Applied(50_002, []event.Event{{Index: 50_002, Type: event.Released, Lock: "l3"}})
	if changed := <-woke; !changed {
		t.Fatal("l3's release did not count as a change")
	}
	// until ends a wait as a possible change; the read is unparked.
	until := make(chan struct{})
	go func() {
		changed, _ := h.WaitLock(ctx, "l3", 50_002, time.Minute, nil, until)
		woke <- changed
	}()
	waitParked(t, h, "l3", 1)
	close(until)
	if changed := <-woke; !changed {
		t.Fatal("until closing did not end the wait as a possible change")
	}
	waitParked(t, h, "l3", 0)
}

func waitParked(t *testing.T, h *History, lock string, n int) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); ; {
		h.mu.RLock()
		got := len(h.parked[lock])
		h.mu.RUnlock()
		if got == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d blocking reads parked on %s, want %d", got, lock, n)
		}
		time.Sleep(time.Millisecond)
	}
}
