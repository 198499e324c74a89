package membership

import (
	"log/slog"
	"time"

	"github.com/hashicorp/raft"

	"github.com/fencer-io/fencer/api/wire"
	"github.com/fencer-io/fencer/fsm/entry"
)

// Raft is the part of *raft.Raft that changes the configuration.
type Raft interface {
	AddVoter(id raft.ServerID, address raft.ServerAddress, prevIndex uint64, timeout time.Duration) raft.IndexFuture
	AddNonvoter(id raft.ServerID, address raft.ServerAddress, prevIndex uint64, timeout time.Duration) raft.IndexFuture
	RemoveServer(id raft.ServerID, prevIndex uint64, timeout time.Duration) raft.IndexFuture
}

// Carry makes the changes of p, the plan for req, in order (the old
// incarnation out, conflicting servers out, the record, the joiner in): Raft's through
// r, each bounded by timeout, and the member records through apply, which
// proposes an entry. Each is a change of its own; if one fails, Carry stops
// and the joiner's next attempt plans from what was done. Raft's errors come
// back unchanged.
func (p JoinPlan) Carry(r Raft, apply func(entry.Command) error, timeout time.Duration, log *slog.Logger, req wire.JoinRequest) error {
	if p.Replace != "" {
		log.Info("replacing member with a new incarnation", "id", req.ID, "old", p.Replace, "new", req.Incarnation)
		if err := r.RemoveServer(raft.ServerID(req.ID), 0, timeout).Error(); err != nil {
			return err
		}
		if err := apply(&entry.RemoveMember{ID: req.ID}); err != nil {
			return err
		}
	}
	for _, s := range p.Remove {
		log.Info("removing conflicting member before join", "id", s.ID, "addr", s.Address, "joiner", req.ID)
		if err := r.RemoveServer(s.ID, 0, timeout).Error(); err != nil {
			return err
		}
	}
	// The record goes first: a member in the configuration without one
	// counts as JSON-only to the format gate, and the joiner's says which
	// format it reads.
	if p.Record != nil {
		if err := apply(&entry.SetMember{Member: *p.Record}); err != nil {
			return err
		}
	}
	if a := p.Add; a != nil {
		add := r.AddNonvoter
		if a.Suffrage == raft.Voter {
			add = r.AddVoter
		}
		if err := add(a.ID, a.Address, 0, timeout).Error(); err != nil {
			return err
		}
		if !p.Promote {
			log.Info("member added", "id", req.ID, "raft_addr", req.RaftAddr, "voter", req.Voter)
		}
	}
	return nil
}
