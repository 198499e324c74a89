package waitq

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"
)

var errGone = errors.New("leadership lost")

// queueOf returns a new table and its queue "a", held until the test ends.
func queueOf(t *testing.T) (*Table[string, int], *Queue[string, int]) {
	var queued atomic.Int64
	tab := New[string, int](&queued)
	q := tab.Get("a")
	t.Cleanup(func() { tab.Put("a", q) })
	return tab, q
}

// push queues a waiter for cmd.
func push(q *Queue[string, int], cmd string) *Waiter[string, int] {
	q.Lock()
	defer q.Unlock()
	return q.Push(cmd)
}

// The count of waiters (MaxWaiters) follows every way in and out of a
// queue: queued, popped by a proposal, put back after a failed one, given
// up, failed on a leadership loss; tables that share it count together. It
// used to miss queueing and giving up, so handoffs drove it below zero and
// the limit never applied.
func TestQueuesCountWaiters(t *testing.T) {
	var queued atomic.Int64
	tab := New[string, int](&queued)
	other := New[int, int](&queued)
	q := tab.Get("a")
	defer tab.Put("a", q)
	ws := make([]*Waiter[string, int], 4)
	q.Lock()
	for i := range ws {
		ws[i] = q.Push("a")
	}
	q.Unlock()
	o := other.Get("a")
	o.Lock()
	o.Push(1)
	o.Unlock()
	if tab.Queued() != 5 || tab.QueuedFor("a") != 4 || other.QueuedFor("a") != 1 {
		t.Fatalf("queued %d, for a %d and %d; want 5, 4 and 1", tab.Queued(), tab.QueuedFor("a"), other.QueuedFor("a"))
	}
	q.Lock()
	if w := q.Pop(); w != ws[0] || !w.taken {
		t.Fatal("pop did not take the head")
	}
	q.pushFront(ws[0]) // the proposal failed
	q.remove(ws[2])    // gave up
	q.Unlock()
	if tab.Queued() != 4 || tab.QueuedFor("a") != 3 {
		t.Fatalf("queued %d, for a %d; want 4 and 3", tab.Queued(), tab.QueuedFor("a"))
	}
	tab.FailAll(errGone)
	other.FailAll(errGone)
	other.Put("a", o)
	if tab.Queued() != 0 || tab.QueuedFor("a") != 0 {
		t.Fatalf("after FailAll: queued %d, for a %d", tab.Queued(), tab.QueuedFor("a"))
	}
	for _, i := range []int{0, 1, 3} {
		if a := <-ws[i].result; a.err != errGone {
			t.Fatalf("waiter %d: %v", i, a.err)
		}
	}
}

// HandOver offers the name to the head waiter only when asked, and a failed
// proposal leaves the head where it was.
func TestHandOver(t *testing.T) {
	tab, q := queueOf(t)
	q.Lock()
	defer q.Unlock()
	if w, err := q.HandOver(true, func(next string) error {
		if next != "" {
			t.Fatalf("nobody waits, yet the proposal carries %q", next)
		}
		return nil
	}); w != nil || err != nil {
		t.Fatalf("empty queue: %v, %v", w, err)
	}
	head := q.Push("first")
	q.Push("second")
	if w, _ := q.HandOver(false, func(next string) error {
		if next != "" {
			t.Fatalf("no offer, yet the proposal carries %q", next)
		}
		return nil
	}); w != nil || q.Len() != 2 {
		t.Fatalf("without an offer: popped %v, %d queued", w, q.Len())
	}
	failed := errors.New("proposal failed")
	if _, err := q.HandOver(true, func(next string) error { return failed }); err != failed || q.Len() != 2 || q.waiters.Front().Value != head || head.taken {
		t.Fatalf("failed proposal: %v, %d queued, head put back: %v", err, q.Len(), q.waiters.Front().Value == head)
	}
	var carried string
	w, err := q.HandOver(true, func(next string) error { carried = next; return nil })
	if err != nil || w != head || carried != "first" || q.Len() != 1 || tab.Queued() != 1 {
		t.Fatalf("handed %v carrying %q (%v), %d left", w, carried, err, q.Len())
	}
}

// A waiter whose wait ends after a proposal took it gets that proposal's
// answer, never gaveUp's: the grant is not dropped. (Whether the answer or
// the end of the wait reaches Wait first is the scheduler's choice; twenty
// rounds meet the second case with near certainty.)
func TestWaitDeliversATakenWaitersGrant(t *testing.T) {
	tab, q := queueOf(t)
	for range 20 {
		q.Lock()
		w := q.Push("a")
		ended := make(chan struct{})
		close(ended)
		got := make(chan int)
		go func() {
			r, _ := q.Wait(context.Background(), w, ended, nil, func() (int, error) { return -1, nil })
			got <- r
		}()
		q.Pop() // a proposal takes the waiter as its wait ends
		q.Unlock()
		w.Answer(7, nil)
		if r := <-got; r != 7 || tab.Queued() != 0 {
			t.Fatalf("taken waiter answered %d with %d queued; want the proposal's 7", r, tab.Queued())
		}
	}
}

// A waiter whose wait ends while it is still queued leaves the queue and
// is answered by gaveUp, or with its context's error.
func TestWaitGivesUp(t *testing.T) {
	tab, q := queueOf(t)
	w := push(q, "a")
	ended := make(chan struct{})
	close(ended)
	if r, err := q.Wait(context.Background(), w, ended, nil, func() (int, error) { return 3, nil }); r != 3 || err != nil || tab.Queued() != 0 {
		t.Fatalf("gave up: %d, %v, %d queued", r, err, tab.Queued())
	}
	w = push(q, "a")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := q.Wait(ctx, w, nil, nil, func() (int, error) { return 3, nil }); !errors.Is(err, context.Canceled) || tab.Queued() != 0 {
		t.Fatalf("cancelled: %v, %d queued", err, tab.Queued())
	}
}

// Serve grants head first while there is room and stops at an error that
// says this node cannot propose.
func TestServe(t *testing.T) {
	_, q := queueOf(t)
	q.Lock()
	defer q.Unlock()
	ws := []*Waiter[string, int]{q.Push("1"), q.Push("2"), q.Push("3"), q.Push("4")}
	room := 2
	q.Serve(func(string) bool { return room > 0 }, func(c string) (int, error) { room--; return int(c[0] - '0'), nil }, func(error) bool { return true })
	if q.Len() != 2 {
		t.Fatalf("%d left after room for 2", q.Len())
	}
	for i, w := range ws[:2] {
		if a := <-w.result; a.r != i+1 {
			t.Fatalf("waiter %d got %d", i+1, a.r)
		}
	}
	q.Serve(func(string) bool { return true }, func(string) (int, error) { return 0, errGone }, func(err error) bool { return err == errGone })
	if q.Len() != 1 {
		t.Fatalf("%d left; want Serve to stop after the first failure", q.Len())
	}
}

// A proposal that frees several names holds each one's queue, pops each
// head waiter, and when its entry is not written puts every one back: each
// is first again, no longer taken (a wait that ends then leaves the queue
// and gets gaveUp's answer, not a grant that never came), and counted as
// queued.
func TestPopPutBackAcrossNames(t *testing.T) {
	var queued atomic.Int64
	tab := New[string, int](&queued)
	names := []string{"a", "b"}
	first := map[string]*Waiter[string, int]{}
	var qs []*Queue[string, int]
	for _, n := range names {
		q := tab.Get(n)
		defer tab.Put(n, q)
		q.Lock()
		first[n] = q.Push(n + "1")
		q.Push(n + "2")
		q.Unlock()
		qs = append(qs, q)
	}
	var popped []*Waiter[string, int]
	for _, q := range qs {
		q.Lock()
		popped = append(popped, q.Pop())
	}
	if queued.Load() != 2 {
		t.Fatalf("%d counted with two heads popped, want 2", queued.Load())
	}
	for i, q := range qs { // the entry failed
		q.PutBack(popped[i])
		q.Unlock()
	}
	if queued.Load() != 4 {
		t.Fatalf("%d counted after putting back, want 4", queued.Load())
	}
	for i, n := range names {
		q := qs[i]
		q.Lock()
		if w := q.Pop(); w != first[n] || w.Cmd != n+"1" {
			t.Fatalf("head of %s after put back is %q, want %q", n, w.Cmd, n+"1")
		}
		q.PutBack(first[n])
		q.Unlock()
		ended := make(chan struct{})
		close(ended)
		got := make(chan int, 1)
		go func() {
			r, _ := q.Wait(context.Background(), first[n], ended, nil, func() (int, error) { return 5, nil })
			got <- r
		}()
		select {
		case r := <-got:
			if r != 5 {
				t.Fatalf("a put-back waiter whose wait ended got %d: want gaveUp's 5", r)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("a put-back waiter whose wait ended still waits for an answer: it is still marked taken")
		}
	}
	if queued.Load() != 2 {
		t.Fatalf("%d counted after two waits ended, want 2", queued.Load())
	}
}
