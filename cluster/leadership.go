package cluster

import (
	"context"
	"fmt"
	"time"

	"github.com/hashicorp/raft"

	"github.com/fencer-io/fencer/cluster/datadir"
	"github.com/fencer-io/fencer/fsm/entry"
)

// Leadership reports whether this node leads, and a channel closed when that
// view ends: leadership changed, or the state was replaced by a restore.
func (n *Node) Leadership() (leader bool, changed <-chan struct{}) { return n.lead.Current() }

// watchLeadership follows Raft's leadership notifications, beginning a new
// view on each.
func (n *Node) watchLeadership(notify <-chan bool) {
	defer n.wg.Done()
	for {
		select {
		case <-n.stop:
			return
		case leader := <-notify:
			n.metrics.LeaderChanges.Inc()
			n.trans.SetLeading(leader) // a follower's old replication does not wait for peers
			changed := n.lead.Begin(leader)
			n.leaderNotice.Notify()
			if leader {
				n.log.Info("became leader; barrier before serving", "term", n.raft.CurrentTerm())
				n.wg.Add(1)
				go n.establish(changed)
			} else {
				n.log.Info("lost leadership")
			}
		}
	}
}

// establish makes a new leader ready for the node's own operations: a
// Barrier, so that the FSM holds every entry committed by earlier leaders,
// and a cluster id if the cluster has none yet.
func (n *Node) establish(changed <-chan struct{}) {
	defer n.wg.Done()
	for {
		err := n.Barrier()
		if err == nil {
			break
		}
		n.log.Warn("barrier failed", "err", err)
		if n.raft.State() != raft.Leader {
			return
		}
		select {
		case <-n.stop:
			return
		case <-time.After(100 * time.Millisecond):
		}
	}
	if n.fsm.ClusterID() == "" {
		if _, err := n.Apply(&entry.SetClusterID{ID: datadir.NewID()}); err != nil {
			n.log.Warn("naming the cluster failed", "err", err)
			return
		}
	}
	if n.lead.SetReady(changed, func() bool { return n.raft.State() == raft.Leader }) {
		n.log.Info("leader ready", "applied_index", n.fsm.AppliedIndex())
	}
}

// awaitLeader returns nil once this node is a leader ready for the node's
// own operations, ErrNotLeader if it is a follower, or an error when ctx
// ends first.
func (n *Node) awaitLeader(ctx context.Context) error {
	for {
		if n.raft.State() != raft.Leader {
			return ErrNotLeader
		}
		ready, ch := n.lead.Ready()
		if ready {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return fmt.Errorf("%w: leader not ready yet", ErrNoLeader)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// IsLeader reports whether this node is the leader and ready to serve; a
// leader handing its leadership over is not.
func (n *Node) IsLeader() bool {
	if n.raft.State() != raft.Leader || n.handingOver.Load() {
		return false
	}
	ready, _ := n.lead.Ready()
	return ready
}

// linearizable makes the local FSM safe to read linearizably: a ready
// leader has applied everything committed before its term, and a quorum
// round proves no newer leader can have acknowledged anything (see
// coord/DESIGN.md, Reads).
func (n *Node) linearizable(ctx context.Context) error {
	if err := n.awaitLeader(ctx); err != nil {
		return err
	}
	return n.VerifyLeader()
}
