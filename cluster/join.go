package cluster

import (
	"context"

	"github.com/hashicorp/raft"

	"github.com/fencer-io/fencer/api/wire"
	"github.com/fencer-io/fencer/cluster/internal/membership"
	"github.com/fencer-io/fencer/fsm/entry"
)

// Join makes a node a member, as membership.PlanJoin decides. It runs on the leader.
func (n *Node) Join(ctx context.Context, req wire.JoinRequest) error {
	conf, err := n.lockConfiguration(ctx)
	if err != nil {
		return err
	}
	defer n.configMu.Unlock()
	known, _ := n.fsm.Member(req.ID)
	plan, err := membership.PlanJoin(conf, known, n.fsm.ClusterID(), req)
	if err != nil || req.DryRun {
		return err
	}
	// The joiner's format is not recorded yet: write no newer one than it
	// says it reads (JSON if it says nothing) until it is.
	n.format.Hold(req.LogFormat)
	return n.carryOut(plan, req)
}

// lockConfiguration waits until this node is a ready leader, takes the
// configuration mutex (one membership change at a time) and reads Raft's
// configuration under it. On success the caller holds n.configMu.
func (n *Node) lockConfiguration(ctx context.Context) (raft.Configuration, error) {
	if err := n.awaitLeader(ctx); err != nil {
		return raft.Configuration{}, err
	}
	n.configMu.Lock()
	cf := n.raft.GetConfiguration()
	if err := cf.Error(); err != nil {
		n.configMu.Unlock()
		return raft.Configuration{}, translate(err)
	}
	return cf.Configuration(), nil
}

// carryOut makes the changes of a join plan, in order. Each is a change of
// its own; if one fails, the joiner's next attempt plans from what was done.
func (n *Node) carryOut(p membership.JoinPlan, req wire.JoinRequest) error {
	timeout := n.cfg.ApplyTimeout
	if p.Replace != "" {
		n.log.Info("replacing member with a new incarnation", "id", req.ID, "old", p.Replace, "new", req.Incarnation)
		if err := n.raft.RemoveServer(raft.ServerID(req.ID), 0, timeout).Error(); err != nil {
			return translate(err)
		}
		if _, err := n.Apply(&entry.RemoveMember{ID: req.ID}); err != nil {
			return err
		}
	}
	for _, s := range p.Remove {
		n.log.Info("removing conflicting member before join", "id", s.ID, "addr", s.Address, "joiner", req.ID)
		if err := n.raft.RemoveServer(s.ID, 0, timeout).Error(); err != nil {
			return translate(err)
		}
	}
	if a := p.Add; a != nil {
		f := n.raft.AddNonvoter(a.ID, a.Address, 0, timeout)
		if a.Suffrage == raft.Voter {
			f = n.raft.AddVoter(a.ID, a.Address, 0, timeout)
		}
		if err := f.Error(); err != nil {
			return translate(err)
		}
		if !p.Promote {
			n.log.Info("member added", "id", req.ID, "raft_addr", req.RaftAddr, "voter", req.Voter)
		}
	}
	if p.Record != nil {
		_, err := n.Apply(&entry.SetMember{Member: *p.Record})
		return err
	}
	return nil
}
