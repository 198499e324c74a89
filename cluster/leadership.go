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
			n.format.Invalidate() // another leader may have changed the members
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
//
// Each step is retried while the node leads (a proposal that timed out may
// or may not have committed: the barrier and the checks below read what
// did), so one slow commit does not leave a leader unready for its term.
func (n *Node) establish(changed <-chan struct{}) {
	defer n.wg.Done()
	for {
		err := n.Barrier()
		if err == nil {
			n.format.Invalidate() // the records as of this term
			if n.fsm.ClusterID() != "" {
				break
			}
			if err = n.recordBootstrap(); err == nil {
				_, err = n.Apply(&entry.SetClusterID{ID: datadir.NewID()})
			}
			if err == nil {
				break
			}
		}
		n.log.Warn("establishing the leadership failed; retrying", "err", err)
		if n.raft.State() != raft.Leader {
			return
		}
		select {
		case <-n.stop:
			return
		case <-changed:
			return
		case <-time.After(100 * time.Millisecond):
		}
	}
	if n.lead.SetReady(changed, func() bool { return n.raft.State() == raft.Leader }) {
		n.log.Info("leader ready", "applied_index", n.fsm.AppliedIndex())
	}
}

// recordBootstrap records, as a new cluster's first leader, every member of
// the configuration this process bootstrapped at this build's log format,
// before the cluster is named and so before any command is served: the
// members of an --initial-cluster (or fencer dev) run one build, and each
// would otherwise count as JSON-only until it registered, up to a second
// or more in which newer commands were refused. Each member's own
// registration then adds its incarnation and keeps the format. A cluster
// that already has records (a restarted first leader, an upgraded cluster
// that predates cluster ids) is left to its members' own registrations.
func (n *Node) recordBootstrap() error {
	if !n.bootstrapped.Load() {
		return nil
	}
	cf := n.raft.GetConfiguration()
	if err := cf.Error(); err != nil {
		return translate(err)
	}
	servers := cf.Configuration().Servers
	for _, s := range servers {
		if _, ok := n.fsm.Member(string(s.ID)); ok {
			return nil
		}
	}
	records := make([]entry.Member, 0, len(servers))
	for _, s := range servers {
		m := entry.Member{ID: string(s.ID), RaftAddr: string(s.Address), HTTPAddr: n.initialHTTPAddr(string(s.ID), string(s.Address)), LogFormat: entry.LogFormat}
		if m.ID == n.cfg.ID {
			m.HTTPAddr, m.Incarnation = n.cfg.HTTPAddr, n.ident.Incarnation
		}
		if m.HTTPAddr == "" {
			return nil // a record without an HTTP address would misroute forwarding
		}
		records = append(records, m)
	}
	for _, m := range records {
		if _, err := n.Apply(&entry.SetMember{Member: m}); err != nil {
			return err
		}
	}
	n.format.Invalidate()
	n.log.Info("recorded the bootstrap members", "members", len(servers), "log_format", entry.LogFormat)
	return nil
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
