package cluster

import (
	"context"
	"fmt"

	"github.com/hashicorp/raft"

	"github.com/fencer-io/fencer/api/wire"
	"github.com/fencer-io/fencer/fsm/entry"
)

// joinPlan is what the leader does to admit a node, in this order.
type joinPlan struct {
	// replace is the joiner's old incarnation, to take out first (its
	// server and its member record); "" for none.
	replace string
	// remove are servers that conflict with the joiner in id or address.
	remove []raft.Server
	// add puts the joiner into the configuration with its suffrage; nil
	// when it is already there as asked.
	add *raft.Server
	// promote: add makes a non-voter that is already there a voter.
	promote bool
	// record is the member record to write; nil when it is already right.
	record *entry.Member
}

// planJoin decides how to admit a node, from the Raft configuration, the
// member record known for the joiner's id, the cluster's id and the request.
// Joins are idempotent: a member already present with the same id, address
// and incarnation needs nothing; an entry that conflicts in id or address is
// removed first. A voter that comes back under its id with a new incarnation
// (a wiped data dir) is refused: it has forgotten votes and entries it
// acknowledged, and taking its vote back silently is unsafe. A dry run only
// says whether the join would be refused.
func planJoin(conf raft.Configuration, known entry.Member, clusterID string, req wire.JoinRequest) (joinPlan, error) {
	var p joinPlan
	if !wire.ValidNodeID(req.ID) || req.RaftAddr == "" || req.HTTPAddr == "" {
		return p, fmt.Errorf("%w: join needs an id, a raft address and an http address", ErrMemberConflict)
	}
	if req.ClusterID != "" && clusterID != "" && req.ClusterID != clusterID {
		return p, fmt.Errorf("%w: the data dir of %q belongs to cluster %s, this is cluster %s; "+
			"start it with an empty data dir to join this cluster", ErrMemberConflict, req.ID, req.ClusterID, clusterID)
	}
	wiped := known.Incarnation != "" && req.Incarnation != "" && known.Incarnation != req.Incarnation
	if req.DryRun {
		if wiped && !req.Replace {
			return p, wipedError(req, known)
		}
		return p, nil
	}
	servers := conf.Servers
	if req.Replace && known.Incarnation != "" && known.Incarnation != req.Incarnation {
		p.replace = known.Incarnation
		servers = withoutServer(servers, req.ID)
		known, wiped = entry.Member{}, false
	}
	present := false
	for _, s := range servers {
		sameID, sameAddr := string(s.ID) == req.ID, string(s.Address) == req.RaftAddr
		switch {
		case sameID && wiped:
			return joinPlan{}, wipedError(req, known)
		case sameID && sameAddr:
			present = true
			if req.Voter && s.Suffrage != raft.Voter {
				p.add, p.promote = &raft.Server{Suffrage: raft.Voter, ID: s.ID, Address: s.Address}, true
			}
		case sameID || sameAddr:
			p.remove = append(p.remove, s)
		}
	}
	if !present {
		p.add = &raft.Server{Suffrage: raft.Nonvoter, ID: raft.ServerID(req.ID), Address: raft.ServerAddress(req.RaftAddr)}
		if req.Voter {
			p.add.Suffrage = raft.Voter
		}
	}
	if want := memberRecord(req, known); want != known {
		p.record = &want
	}
	return p, nil
}

// memberRecord is the record a join leaves for the joiner, given the one
// known for its id.
func memberRecord(req wire.JoinRequest, known entry.Member) entry.Member {
	want := entry.Member{ID: req.ID, RaftAddr: req.RaftAddr, HTTPAddr: req.HTTPAddr, Incarnation: req.Incarnation, LogFormat: req.LogFormat}
	if req.Incarnation == "" {
		// An operator's add (members add: not the node itself) knows
		// nothing of the member's data dir or build: it changes addresses
		// and suffrage, and keeps what the member recorded. Erasing the
		// incarnation would switch off planJoin's wiped-disk check for it.
		// The format is kept only on the same Raft address: another
		// address may be another machine with an older build, which
		// records its own format when it registers.
		want.Incarnation = known.Incarnation
		if req.LogFormat == 0 && known.RaftAddr == req.RaftAddr {
			want.LogFormat = known.LogFormat
		}
	}
	return want
}

func withoutServer(servers []raft.Server, id string) []raft.Server {
	var out []raft.Server
	for _, s := range servers {
		if string(s.ID) != id {
			out = append(out, s)
		}
	}
	return out
}

func wipedError(req wire.JoinRequest, known entry.Member) error {
	return fmt.Errorf("%w: member %q is in the cluster with another data dir (incarnation %s, now %s); "+
		"its disk was wiped or replaced, and a Raft voter must not forget what it acknowledged. "+
		"Remove it first (fencer members remove %s) and start it again, or start it with --replace",
		ErrMemberConflict, req.ID, known.Incarnation, req.Incarnation, req.ID)
}

// Join makes a node a member, as planJoin decides. It runs on the leader.
func (n *Node) Join(ctx context.Context, req wire.JoinRequest) error {
	conf, err := n.lockConfiguration(ctx)
	if err != nil {
		return err
	}
	defer n.configMu.Unlock()
	known, _ := n.fsm.Member(req.ID)
	plan, err := planJoin(conf, known, n.fsm.ClusterID(), req)
	if err != nil || req.DryRun {
		return err
	}
	// The joiner's format is not recorded yet: write no newer one than it
	// says it reads (JSON if it says nothing) until it is.
	n.holdFormat(req.LogFormat)
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
func (n *Node) carryOut(p joinPlan, req wire.JoinRequest) error {
	timeout := n.cfg.ApplyTimeout
	if p.replace != "" {
		n.log.Info("replacing member with a new incarnation", "id", req.ID, "old", p.replace, "new", req.Incarnation)
		if err := n.raft.RemoveServer(raft.ServerID(req.ID), 0, timeout).Error(); err != nil {
			return translate(err)
		}
		if _, err := n.Apply(&entry.RemoveMember{ID: req.ID}); err != nil {
			return err
		}
	}
	for _, s := range p.remove {
		n.log.Info("removing conflicting member before join", "id", s.ID, "addr", s.Address, "joiner", req.ID)
		if err := n.raft.RemoveServer(s.ID, 0, timeout).Error(); err != nil {
			return translate(err)
		}
	}
	if a := p.add; a != nil {
		f := n.raft.AddNonvoter(a.ID, a.Address, 0, timeout)
		if a.Suffrage == raft.Voter {
			f = n.raft.AddVoter(a.ID, a.Address, 0, timeout)
		}
		if err := f.Error(); err != nil {
			return translate(err)
		}
		if !p.promote {
			n.log.Info("member added", "id", req.ID, "raft_addr", req.RaftAddr, "voter", req.Voter)
		}
	}
	if p.record != nil {
		_, err := n.Apply(&entry.SetMember{Member: *p.record})
		return err
	}
	return nil
}
