package membership

import (
	"fmt"

	"github.com/hashicorp/raft"
)

// Start is what a starting node knows of itself: its configuration and its
// data dir.
type Start struct {
	ID        string
	DataDir   string
	Bootstrap bool          // it is to bootstrap a cluster of its own
	Join      bool          // it was given members to join through
	Initial   []raft.Server // its initial cluster, if it was given one
	HasState  bool          // its data dir holds Raft state
	ClusterID string        // the cluster its data dir records, if any
}

// View is what the members a node was told about said when probed.
type View struct {
	Running   bool   // one of them knows a leader
	ClusterID string // the first cluster id one reported
}

// StartPlan is what a node does before and after Raft starts.
type StartPlan struct {
	// PreJoin: ask the leader to admit this node before Raft starts.
	PreJoin bool
	// Bootstrap is the first configuration to write; nil when there is
	// none to write.
	Bootstrap []raft.Server
}

// NeedsProbe reports whether the start depends on what the peers say: an
// empty data dir with an initial cluster (bootstrap, or join what already
// runs?) and a data dir that records its cluster (is it theirs?).
func (s Start) NeedsProbe() bool {
	return !s.HasState && len(s.Initial) > 0 || s.ClusterID != ""
}

// Plan decides how the node starts, from what its peers said (view); self
// is its own Raft address. A node whose data dir is empty but whose initial
// cluster already has a leader joins rather than bootstrap: bootstrapping
// again would give it a fresh vote in a cluster that may count on what it
// acknowledged before.
func (s Start) Plan(view View, self raft.ServerAddress) (StartPlan, error) {
	if s.ClusterID != "" && view.ClusterID != "" && view.ClusterID != s.ClusterID {
		return StartPlan{}, fmt.Errorf("data dir %s belongs to cluster %s, but the members this node was told about are cluster %s: "+
			"start it with an empty data dir to join them, or point it at its own cluster", s.DataDir, s.ClusterID, view.ClusterID)
	}
	switch {
	case s.HasState:
		return StartPlan{}, nil
	case s.Join || len(s.Initial) > 0 && view.Running:
		// A node with no state takes part in Raft only once the leader
		// has accepted it, so a wiped voter never votes under its old id.
		return StartPlan{PreJoin: true}, nil
	case s.Bootstrap:
		return StartPlan{Bootstrap: []raft.Server{{ID: raft.ServerID(s.ID), Address: self}}}, nil
	case len(s.Initial) > 0:
		return StartPlan{Bootstrap: s.Initial}, nil
	}
	return StartPlan{}, nil
}
