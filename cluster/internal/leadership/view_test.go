package leadership

import "testing"

func closed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// Each change ends the view it replaces; readiness belongs to one view, is
// refused to a view that already ended, and survives a restart of the view
// (a restore) but not a change of leadership.
func TestViewEndsOnEveryChange(t *testing.T) {
	v := NewView()
	if leader, ch := v.Current(); leader || closed(ch) {
		t.Fatalf("a new view: leader %v, ended %v", leader, closed(ch))
	}
	_, first := v.Current()
	stale := v.Begin(true)
	if !closed(first) {
		t.Fatal("Begin did not end the view before it")
	}
	current := v.Begin(true)
	if !closed(stale) {
		t.Fatal("Begin did not end the view before it")
	}
	leading := func() bool { return true }
	if v.SetReady(stale, leading) {
		t.Fatal("SetReady accepted a view that had ended")
	}
	if ready, _ := v.Ready(); ready {
		t.Fatal("ready after a refused SetReady")
	}
	if v.SetReady(current, func() bool { return false }) {
		t.Fatal("SetReady accepted a node that no longer leads")
	}
	_, readyCh := v.Ready()
	if !v.SetReady(current, leading) || !closed(readyCh) {
		t.Fatal("SetReady refused the current view, or left its channel open")
	}

	v.Restart()
	if leader, ch := v.Current(); !leader || closed(ch) || !closed(current) {
		t.Fatalf("after Restart: leader %v, new view ended %v, old view ended %v", leader, closed(ch), closed(current))
	}
	if ready, _ := v.Ready(); !ready {
		t.Fatal("Restart dropped readiness")
	}

	v.Begin(false)
	if ready, ch := v.Ready(); ready || closed(ch) {
		t.Fatalf("after losing leadership: ready %v, ready channel closed %v", ready, closed(ch))
	}
}

func TestNoticeClosesOnNotify(t *testing.T) {
	var n Notice
	ch := n.Changed()
	if closed(ch) || n.Changed() != ch {
		t.Fatal("Changed before any Notify: closed, or not the same channel")
	}
	n.Notify()
	if !closed(ch) || closed(n.Changed()) {
		t.Fatal("Notify did not close the channel, or the next one is closed")
	}
}
