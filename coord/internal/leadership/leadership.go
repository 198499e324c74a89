// Package leadership follows a Raft node's views of leadership for the
// coordination layer: each view's leader-only work ends with it, a leader's
// view is promoted (and its requests served) only after a Barrier has
// applied everything committed before it, and callers wait for the view
// they are served in to be promoted.
//
// A view (Raft.Leadership) ends on every leadership change Raft reports and
// also when the state is replaced wholesale (a restore), so all leader-only
// work is keyed to one view and never outlives it.
package leadership

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/fencer-io/fencer/cluster"
)

// Raft is what following leadership needs of the Raft node.
type Raft interface {
	// Leadership reports whether this node leads, and a channel closed
	// when that view ends.
	Leadership() (leader bool, changed <-chan struct{})
	// Barrier returns once the FSM has applied every entry committed
	// before the call.
	Barrier() error
}

// Hooks are the leader-only work of the views.
type Hooks struct {
	// End runs as each view begins, before any promotion: it ends what
	// the previous view held, answering its waiters with err.
	End func(err error)
	// Prepare, when set, runs once a leading view's Barrier returned and
	// before Promote: what must be in the log before the view serves
	// anyone (the cluster's grant-history settings on a new cluster). An
	// error is retried, as a failed Barrier is, while the view lasts.
	Prepare func() error
	// Promote runs once a leading view's Barrier returned and before any
	// caller is served in it: it starts the view's leader-only work.
	Promote func()
}

// Follower follows the views of one Raft node until Close.
type Follower struct {
	raft  Raft
	hooks Hooks
	log   *slog.Logger

	mu   sync.Mutex
	view view

	stop chan struct{}
	wg   sync.WaitGroup
}

// view is the follower's side of one view of leadership.
type view struct {
	leader  bool
	changed <-chan struct{}
	ready   bool          // promoted: requests served
	readyCh chan struct{} // closed when ready
}

// Follow begins the node's current view and follows the next ones.
func Follow(r Raft, hooks Hooks, log *slog.Logger) *Follower {
	f := &Follower{raft: r, hooks: hooks, log: log, stop: make(chan struct{})}
	leader, changed := r.Leadership()
	f.begin(leader, changed)
	f.wg.Add(1)
	go f.follow(changed)
	return f
}

// Close stops following and waits for a promotion under way to end.
func (f *Follower) Close() {
	close(f.stop)
	f.wg.Wait()
}

// follow begins a new view each time the current one ends.
func (f *Follower) follow(changed <-chan struct{}) {
	defer f.wg.Done()
	for {
		select {
		case <-f.stop:
			return
		case <-changed:
		}
		var leader bool
		leader, changed = f.raft.Leadership()
		f.begin(leader, changed)
	}
}

// begin ends whatever the previous view held on the leader and, on a
// leader, starts its promotion.
func (f *Follower) begin(leader bool, changed <-chan struct{}) {
	f.mu.Lock()
	f.view = view{leader: leader, changed: changed, readyCh: make(chan struct{})}
	f.mu.Unlock()
	if !leader {
		f.hooks.End(cluster.ErrNotLeader)
		return
	}
	f.hooks.End(fmt.Errorf("%w: leadership changed or the state was replaced; retry", cluster.ErrNoLeader))
	f.wg.Add(1)
	go f.promote(changed)
}

// promote makes this leader serve: a Barrier, so that the FSM holds every
// entry committed by earlier leaders, then the Promote hook (deadlines are
// not replicated, so it restarts every held lease at its full TTL: a lease
// may outlive its TTL across a failover, never end early), and only then
// are requests served.
func (f *Follower) promote(changed <-chan struct{}) {
	defer f.wg.Done()
	if !f.retry(changed, "barrier failed", f.raft.Barrier) {
		return
	}
	if f.hooks.Prepare != nil && !f.retryFor(changed, "preparing the leader failed", f.hooks.Prepare, prepareBound) {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	select {
	case <-changed:
		return // a newer view began meanwhile
	default:
	}
	f.hooks.Promote()
	f.view.ready = true
	close(f.view.readyCh)
}

// prepareBound is how long a new leader retries its Prepare hook before it
// serves without it: what Prepare writes (the history's settings) is also
// proposed later by a loop of its own, and a leader that never serves
// because, say, a member down since before the cluster was named has no
// record is worse than a history that starts a little late.
const prepareBound = 10 * time.Second

// retry calls step until it succeeds, pausing between failures, and
// reports false, having given up, when the view ends or the follower stops.
func (f *Follower) retry(changed <-chan struct{}, failed string, step func() error) bool {
	return f.retryFor(changed, failed, step, 0)
}

// retryFor is retry that, with a bound, also reports true once it has
// tried for that long.
func (f *Follower) retryFor(changed <-chan struct{}, failed string, step func() error, bound time.Duration) bool {
	pause := 5 * time.Millisecond
	start := time.Now()
	for {
		err := step()
		if err == nil {
			return true
		}
		if bound > 0 && time.Since(start) >= bound {
			f.log.Warn(failed+"; serving without it", "err", err, "tried", bound)
			return true
		}
		level := slog.LevelWarn
		if errors.Is(err, cluster.ErrNoLeader) {
			level = slog.LevelDebug // not ready yet: the node's own first entries
		}
		f.log.Log(context.Background(), level, failed, "err", err)
		select {
		case <-f.stop:
			return false
		case <-changed:
			return false
		case <-time.After(pause):
		}
		pause = min(2*pause, 100*time.Millisecond)
	}
}

// Await returns nil once this node leads and is promoted in the node's
// current view of leadership, cluster.ErrNotLeader on a follower, or an
// error when ctx ends first.
func (f *Follower) Await(ctx context.Context) error {
	for {
		leader, changed := f.raft.Leadership()
		if !leader {
			return cluster.ErrNotLeader
		}
		f.mu.Lock()
		v := f.view
		f.mu.Unlock()
		if v.ready && v.changed == changed {
			return nil
		}
		ready := v.readyCh
		if v.ready {
			ready = nil // an older view's; wait for the next one
		}
		select {
		case <-ready:
		case <-time.After(50 * time.Millisecond): // the view may have moved on
		case <-ctx.Done():
			return fmt.Errorf("%w: leader not ready yet", cluster.ErrNoLeader)
		}
	}
}

// Ready reports whether this node leads and is promoted in its current
// view.
func (f *Follower) Ready() bool {
	leader, changed := f.raft.Leadership()
	f.mu.Lock()
	defer f.mu.Unlock()
	return leader && f.view.ready && f.view.changed == changed
}
