// Package membership is how a node becomes a member: how it starts
// (restart, bootstrap, or ask to join first), and how the leader admits it,
// a pure plan from the Raft configuration, the member record known for the
// joiner, the cluster's id and the join request, carried out change by
// change through the part of Raft it declares. The plans are table-tested
// without Raft.
package membership

import (
	"errors"
	"fmt"

	"github.com/hashicorp/raft"

	"github.com/fencer-io/fencer/api/wire"
	"github.com/fencer-io/fencer/fsm/entry"
)

// ErrConflict: a join or add conflicts with an existing member, or with the
// cluster (cluster.ErrMemberConflict is this error).
var ErrConflict = errors.New("member conflict")

// JoinPlan is what the leader does to admit a node, in this order.
type JoinPlan struct {
	// Replace is the joiner's old incarnation, to take out first (its
	// server and its member record); "" for none.
	Replace string
	// Remove are servers that conflict with the joiner in id or address.
	Remove []raft.Server
	// Add puts the joiner into the configuration with its suffrage; nil
	// when it is already there as asked.
	Add *raft.Server
	// Promote: Add makes a non-voter that is already there a voter.
	Promote bool
	// Record is the member record to write; nil when it is already right.
	Record *entry.Member
}

// PlanJoin decides how to admit a node, from the Raft configuration, the
// member record known for the joiner's id, the cluster's id and the request.
// Joins are idempotent: a member already present with the same id, address
// and incarnation needs nothing; an entry that conflicts in id or address is
// removed first. A voter that comes back under its id with a new incarnation
// (a wiped data dir) is refused: it has forgotten votes and entries it
// acknowledged, and taking its vote back silently is unsafe. A dry run only
// says whether the join would be refused.
func PlanJoin(conf raft.Configuration, known entry.Member, clusterID string, req wire.JoinRequest) (JoinPlan, error) {
	var p JoinPlan
	if !wire.ValidNodeID(req.ID) || req.RaftAddr == "" || req.HTTPAddr == "" {
		return p, fmt.Errorf("%w: join needs an id, a raft address and an http address", ErrConflict)
	}
	if req.ClusterID != "" && clusterID != "" && req.ClusterID != clusterID {
		return p, fmt.Errorf("%w: the data dir of %q belongs to cluster %s, this is cluster %s; "+
			"start it with an empty data dir to join this cluster", ErrConflict, req.ID, req.ClusterID, clusterID)
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
		p.Replace = known.Incarnation
		servers = withoutServer(servers, req.ID)
		known, wiped = entry.Member{}, false
	}
	present := false
	for _, s := range servers {
		sameID, sameAddr := string(s.ID) == req.ID, string(s.Address) == req.RaftAddr
		switch {
		case sameID && wiped:
			return JoinPlan{}, wipedError(req, known)
		case sameID && sameAddr:
			present = true
			if req.Voter && s.Suffrage != raft.Voter {
				p.Add, p.Promote = &raft.Server{Suffrage: raft.Voter, ID: s.ID, Address: s.Address}, true
			}
		case sameID || sameAddr:
			p.Remove = append(p.Remove, s)
		}
	}
	if !present {
		p.Add = &raft.Server{Suffrage: raft.Nonvoter, ID: raft.ServerID(req.ID), Address: raft.ServerAddress(req.RaftAddr)}
		if req.Voter {
			p.Add.Suffrage = raft.Voter
		}
	}
	if want := memberRecord(req, known); want != known {
		p.Record = &want
	}
	return p, nil
}

// memberRecord is the record a join leaves for the joiner, given the one
// known for its id.
func memberRecord(req wire.JoinRequest, known entry.Member) entry.Member {
	want := entry.Member{ID: req.ID, RaftAddr: req.RaftAddr, HTTPAddr: req.HTTPAddr, Incarnation: req.Incarnation, LogFormat: req.LogFormat, Key: req.MemberKey}
	if want.Key == "" && req.Incarnation != "" {
		// A member's own join without a key (the leader could not record
		// one yet) leaves the key it has: only the member itself, by its
		// signature, could have sent this join.
		want.Key = known.Key
	}
	if req.Incarnation == "" {
		// An operator's add keeps the member's key too: clearing it let
		// whoever holds the cluster secret register a key of its own for
		// the id before the member did (a review took a member over so);
		// a key is replaced only by removing the member
		// (docs/security.md, rotation). An operator's add (members add: not the node itself) knows
		// nothing of the member's data dir or build: it changes addresses
		// and suffrage, and keeps what the member recorded. Erasing the
		// incarnation would switch off PlanJoin's wiped-disk check for it.
		// The format is kept only on the same Raft address: another
		// address may be another machine with an older build, which
		// records its own format when it registers.
		want.Incarnation, want.Key = known.Incarnation, known.Key
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
		"Remove it first (fencer members remove %s) and start it again, or (with TLS) start it with --replace",
		ErrConflict, req.ID, known.Incarnation, req.Incarnation, req.ID)
}
