package leadership

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
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

// A leader serves only after its Barrier, and only in the view it was
// promoted in: a view that ends before its Barrier returns is never
// promoted, and every view's start ends the previous one's work.
func TestPromotionAfterBarrierInItsOwnView(t *testing.T) {
	r := &raft{changed: make(chan struct{})}
	ends := make(chan error, 3)
	var promoted atomic.Int32
	f := Follow(r, Hooks{End: func(err error) { ends <- err }, Promote: func() { promoted.Add(1) }}, slog.New(slog.DiscardHandler))
	defer f.Close()
	if err := f.Await(context.Background()); !errors.Is(err, cluster.ErrNotLeader) {
		t.Fatalf("a follower awaits: %v", err)
	}
	if err := <-ends; !errors.Is(err, cluster.ErrNotLeader) {
		t.Fatalf("the follower's view began with %v", err)
	}

	stuck := make(chan struct{}) // this view's Barrier never returns
	r.change(true, stuck)
	if err := <-ends; !errors.Is(err, cluster.ErrNoLeader) {
		t.Fatalf("the leader's view began with %v", err)
	}
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
	if err := <-ends; !errors.Is(err, cluster.ErrNoLeader) || promoted.Load() != 1 {
		t.Fatalf("promoted %d times, the last view began with %v; want once", promoted.Load(), err)
	}
}
