package cluster

import (
	"context"
	"errors"

	"github.com/hashicorp/raft"

	"github.com/fencer-io/fencer/cluster/internal/handoff"
)

// handOff asks the most up-to-date other voter to stand for election at
// once (see cluster/internal/handoff). The most up-to-date voter is the one
// with the highest last index, asked over HTTP; without answers, the first
// voter.
func (n *Node) handOff() {
	ctx, cancel := context.WithTimeout(context.Background(), handoff.Timeout)
	defer cancel()
	var voters []raft.Server
	addrs := map[string]string{}
	for _, s := range n.raft.GetConfiguration().Configuration().Servers {
		if s.Suffrage == raft.Voter && string(s.ID) != n.cfg.ID {
			voters = append(voters, s)
			if m, ok := n.fsm.Member(string(s.ID)); ok && m.HTTPAddr != "" {
				addrs[string(s.ID)] = m.HTTPAddr
			}
		}
	}
	if len(voters) == 0 {
		return
	}
	target := handoff.Best(voters, n.peers.LastIndexes(ctx, addrs, handoff.Timeout/2))
	switch err := handoff.Send(ctx, n.trans, raft.ServerID(n.cfg.ID), target); {
	case errors.Is(err, context.DeadlineExceeded):
		n.log.Warn("handing leadership over timed out; the followers elect a leader once this node is silent", "to", target.ID)
	case err != nil:
		n.log.Warn("could not hand leadership over; the followers elect a leader once this node is silent", "to", target.ID, "err", err)
	default:
		n.log.Info("asked a follower to stand for election now", "to", target.ID)
	}
}
