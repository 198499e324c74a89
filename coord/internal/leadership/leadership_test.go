package leadership

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/fencer-io/fencer/cluster"
)

// raft is a node whose leadership and barrier the test drives.
type raft struct {
	mu      sync.Mutex
	leader  bool
	changed chan struct{}
	barrier chan struct{} // Barrier returns once it is closed
}

func (r *raft) Leadership() (bool, <-chan struct{}) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.leader, r.changed
}

func (r *raft) Barrier() error {
	r.mu.Lock()
	b := r.barrier
	r.mu.Unlock()
	<-b
	return nil
}

// change begins a new view.
func (r *raft) change(leader bool, barrier chan struct{}) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.leader, r.barrier = leader, barrier
	close(r.changed)
	r.changed = make(chan struct{})
}

func poll(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// A leader serves only after its Barrier, and only in the view it was
// promoted in: a view that ends before its Barrier returns is never
// promoted, and every view's start ends the previous one's work.
func TestPromotionAfterBarrierInItsOwnView(t *testing.T) {
	r := &raft{changed: make(chan struct{})}
	var mu sync.Mutex
	var ends []error
	promoted := 0
	f := Follow(r, Hooks{
		End:     func(err error) { mu.Lock(); ends = append(ends, err); mu.Unlock() },
		Promote: func() { mu.Lock(); promoted++; mu.Unlock() },
	}, slog.New(slog.DiscardHandler))
	defer f.Close()
	if err := f.Await(context.Background()); !errors.Is(err, cluster.ErrNotLeader) {
		t.Fatalf("a follower awaits: %v", err)
	}

	stuck := make(chan struct{}) // this view's Barrier never returns
	r.change(true, stuck)
	poll(t, "the leader's view to begin", func() bool { mu.Lock(); defer mu.Unlock(); return len(ends) == 2 })
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if err := f.Await(ctx); !errors.Is(err, cluster.ErrNoLeader) || f.Ready() {
		t.Fatalf("before its Barrier the leader awaits: %v (ready %v)", err, f.Ready())
	}

	barrier := make(chan struct{})
	r.change(true, barrier) // a new view: the old one's Barrier is moot
	close(stuck)
	close(barrier)
	if err := f.Await(context.Background()); err != nil || !f.Ready() {
		t.Fatalf("after its Barrier: %v (ready %v)", err, f.Ready())
	}
	mu.Lock()
	defer mu.Unlock()
	if promoted != 1 || len(ends) != 3 || !errors.Is(ends[0], cluster.ErrNotLeader) || !errors.Is(ends[2], cluster.ErrNoLeader) {
		t.Fatalf("promoted %d times, ends %v; want once, and three ends", promoted, ends)
	}
}
