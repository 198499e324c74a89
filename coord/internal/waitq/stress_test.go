package waitq

import (
	"context"
	"errors"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Many callers take and free one name through a queue, as the lock service
// does: waits that end (a timer, a context) race the proposals that hand
// the name to the head waiter, and some of those proposals fail and are
// retried. The name is never held twice at once, and never left held with
// nobody holding it: a grant is neither handed twice nor dropped.
func TestNoGrantDroppedOrHandedTwice(t *testing.T) {
	var queued atomic.Int64
	tab := New[int, int](&queued)
	errHeld := errors.New("held")
	errFailed := errors.New("proposal failed")
	var (
		held    bool // the name's state, guarded by its queue's mutex
		holders atomic.Int32
		grants  atomic.Int64
		wg      sync.WaitGroup
	)
	stop := make(chan struct{})
	const callers, rounds = 32, 400
	for id := 1; id <= callers; id++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rnd := rand.New(rand.NewPCG(uint64(id), 7))
			for range rounds {
				q := tab.Get("x")
				q.Lock()
				got := false
				if !held && q.Len() == 0 {
					held, got = true, true
					q.Unlock()
				} else {
					w := q.Push(id)
					q.Unlock()
					ended := make(chan struct{})
					timer := time.AfterFunc(time.Duration(rnd.IntN(3000))*time.Microsecond, func() { close(ended) })
					ctx, cancel := context.WithTimeout(context.Background(), time.Duration(rnd.IntN(3000))*time.Microsecond)
					r, err := q.Wait(ctx, w, ended, stop, func() (int, error) {
						if held {
							return 0, errHeld
						}
						held = true
						return id, nil
					})
					timer.Stop()
					cancel()
					if err == nil {
						if r != id {
							t.Errorf("caller %d was answered with caller %d's grant", id, r)
						}
						got = true
					}
				}
				if got {
					grants.Add(1)
					if n := holders.Add(1); n != 1 {
						t.Errorf("%d holders at once", n)
					}
					runtime.Gosched()
					holders.Add(-1)
					for { // free the name, handing it to the head waiter
						q.Lock()
						w, err := q.HandOver(true, func(next int) error {
							if rnd.IntN(4) == 0 {
								return errFailed
							}
							held = next != 0
							return nil
						})
						if err == nil {
							if w != nil {
								w.Answer(w.Cmd, nil)
							}
							q.Serve(func(int) bool { return !held }, func(c int) (int, error) {
								held = true
								return c, nil
							}, func(error) bool { return true })
						}
						q.Unlock()
						if err == nil {
							break
						}
					}
				}
				tab.Put("x", q)
			}
		}()
	}
	wg.Wait()
	q := tab.Get("x")
	defer tab.Put("x", q)
	q.Lock()
	defer q.Unlock()
	if held {
		t.Fatal("the name is left held with nobody holding it: a grant was dropped")
	}
	if n := tab.Queued(); n != 0 {
		t.Fatalf("%d waiters counted after every caller returned", n)
	}
	t.Logf("%d grants", grants.Load())
}
