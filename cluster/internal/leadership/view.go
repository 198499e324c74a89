// Package leadership is a node's view of its own leadership: whether it
// leads, a channel closed when that view ends, and whether the node's own
// leader-only operations may run in it; the notice of a change of the
// leader it knows; and waiting out an election in progress.
package leadership

import "sync"

// View is this node's view of its own leadership. Every change Raft
// reports (Begin), and every replacement of the state (Restart), ends the
// current view: its changed channel is closed and a new one begins.
// Whoever does leader-only work (the node's own operations, the
// coordination layer) keys it to one view, so that no work outlives the
// view it began in.
type View struct {
	mu      sync.Mutex
	leader  bool
	changed chan struct{}
	// ready: the node's own operations may run in this view (the Barrier
	// ran and the cluster is named); readyCh is closed then.
	ready   bool
	readyCh chan struct{}
}

// NewView is the view of a node that does not lead.
func NewView() *View {
	return &View{changed: make(chan struct{}), readyCh: make(chan struct{})}
}

// Current reports whether the node leads, and a channel closed when that
// view ends.
func (v *View) Current() (leader bool, changed <-chan struct{}) {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.leader, v.changed
}

// Begin starts a new view after a change Raft reported and returns its
// channel; the node's own operations wait until SetReady in it.
func (v *View) Begin(leader bool) <-chan struct{} {
	v.mu.Lock()
	defer v.mu.Unlock()
	close(v.changed)
	v.leader, v.changed = leader, make(chan struct{})
	if v.ready {
		v.ready, v.readyCh = false, make(chan struct{})
	}
	return v.changed
}

// Restart ends the current view without a change of leader, after the
// state was replaced wholesale: leader-only work starts over from the new
// state. The node's own operations need nothing re-established.
func (v *View) Restart() {
	v.mu.Lock()
	defer v.mu.Unlock()
	close(v.changed)
	v.changed = make(chan struct{})
}

// SetReady lets the node's own operations run, if the view that began with
// changed is still the current one and leading still holds. It reports
// whether it did.
func (v *View) SetReady(changed <-chan struct{}, leading func() bool) bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.changed != changed || !leading() {
		return false
	}
	v.ready = true
	close(v.readyCh)
	return true
}

// Ready reports whether the node's own operations may run, and a channel
// closed once they may in the current view.
func (v *View) Ready() (bool, <-chan struct{}) {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.ready, v.readyCh
}

// Notice is a channel closed, and replaced, whenever the leader a node
// reports may have changed.
type Notice struct {
	mu sync.Mutex
	ch chan struct{}
}

// Changed returns the channel the next Notify closes.
func (l *Notice) Changed() <-chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.ch == nil {
		l.ch = make(chan struct{})
	}
	return l.ch
}

// Notify closes the channel Changed returned, and starts a new one.
func (l *Notice) Notify() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.ch != nil {
		close(l.ch)
	}
	l.ch = make(chan struct{})
}
