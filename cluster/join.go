package cluster

import (
	"context"
	"fmt"

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
	if req.MemberKey != "" {
		if _, ok := wire.ParseMemberKey(req.MemberKey); !ok {
			return fmt.Errorf("%w: %s: not a member key", ErrMemberConflict, wire.HeaderMemberKey)
		}
		// A key speaks for one member: a cloned data dir (or a pre-seeded
		// image) would let each id sign as the others.
		for _, m := range n.fsm.Members() {
			if m.Key == req.MemberKey && m.ID != req.ID {
				return n.confirmed(fmt.Errorf("%w: the member key %s presents is %s's; a data dir copied from another member must not join (delete its member.key)", ErrMemberConflict, req.ID, m.ID))
			}
		}
	}
	known, _ := n.fsm.Member(req.ID)
	// A key is recorded only while every member, the joiner too, reads it
	// (an older build would drop it): the record is written without one,
	// the member presents the cluster secret meanwhile, and registers its
	// key again once every member reads format 7 (Node.awaitRekey). A
	// member's own join that says it reads an older format (a downgrade)
	// clears its key as well; an operator's add says no format
	// (req.LogFormat 0, no incarnation) and neither brings a key nor
	// clears the member's.
	if n.format.Format() < entry.LogFormatMemberKey || req.Incarnation != "" && req.LogFormat < entry.LogFormatMemberKey {
		req.MemberKey, known.Key = "", ""
	}
	plan, err := membership.PlanJoin(conf, known, n.fsm.ClusterID(), req)
	if err != nil {
		return n.confirmed(err)
	}
	if req.DryRun {
		return nil
	}
	if plan.Add != nil {
		// From the moment the joiner is added it is sent every entry, and
		// the gate's cached format may predate its record: write no newer
		// format than it says it reads (JSON if it says nothing) until the
		// records are read again. A join that adds nobody (a member
		// registering again, a replay) changes no member's format.
		defer n.format.Hold(req.LogFormat)()
	}
	defer n.format.Invalidate()
	return translate(plan.Carry(n.raft, n.propose, n.cfg.ApplyTimeout, n.log, req))
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

// confirmed returns a refusal read from this leader's own configuration or
// records once a quorum round proves it still leads (its view of the
// members may be a deposed leader's); the round's error otherwise.
func (n *Node) confirmed(refusal error) error {
	if err := n.VerifyLeader(); err != nil {
		return err
	}
	return refusal
}

// propose is Apply for a command whose result is only an error.
func (n *Node) propose(cmd entry.Command) error {
	_, err := n.Apply(cmd)
	return err
}
