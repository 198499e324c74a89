package cluster

import (
	"context"
	"time"

	"github.com/hashicorp/raft"
)

// handOffTimeout bounds handOff: past it, the node goes on stopping and the
// followers elect a leader when their heartbeat timeout runs out.
const handOffTimeout = time.Second

// handOff asks the most up-to-date other voter to stand for election at
// once, with Raft's TimeoutNow: the last step of a leadership transfer,
// which this node sends itself because Raft's own transfer runs on the main
// loop, the goroutine a stalled write holds. A follower told so starts an
// election without a pre-vote, and the others grant their votes although
// they still heard from this leader (the request says it is a transfer).
// The most up-to-date voter is the one with the highest last index, asked
// over HTTP; without answers, the first voter. It is only a head start: if
// it fails, the followers elect a leader anyway once this node is silent.
func (n *Node) handOff() {
	ctx, cancel := context.WithTimeout(context.Background(), handOffTimeout)
	defer cancel()
	target, ok := n.handOffTarget(ctx)
	if !ok {
		return
	}
	req := &raft.TimeoutNowRequest{RPCHeader: raft.RPCHeader{
		ProtocolVersion: raft.ProtocolVersionMax,
		ID:              []byte(n.cfg.ID),
		Addr:            n.trans.EncodePeer(raft.ServerID(n.cfg.ID), n.trans.LocalAddr()),
	}}
	done := make(chan error, 1)
	go func() { done <- n.trans.TimeoutNow(target.ID, target.Address, req, &raft.TimeoutNowResponse{}) }()
	select {
	case err := <-done:
		if err != nil {
			n.log.Warn("could not hand leadership over; the followers elect a leader once this node is silent", "to", target.ID, "err", err)
			return
		}
		n.log.Info("asked a follower to stand for election now", "to", target.ID)
	case <-ctx.Done():
		n.log.Warn("handing leadership over timed out; the followers elect a leader once this node is silent", "to", target.ID)
	}
}

// handOffTarget picks the other voter with the highest last index, the
// first voter when none answers.
func (n *Node) handOffTarget(ctx context.Context) (raft.Server, bool) {
	var voters []raft.Server
	for _, s := range n.raft.GetConfiguration().Configuration().Servers {
		if s.Suffrage == raft.Voter && string(s.ID) != n.cfg.ID {
			voters = append(voters, s)
		}
	}
	if len(voters) == 0 {
		return raft.Server{}, false
	}
	addrs := map[string]string{}
	for _, s := range voters {
		if m, ok := n.fsm.Member(string(s.ID)); ok && m.HTTPAddr != "" {
			addrs[string(s.ID)] = m.HTTPAddr
		}
	}
	last := n.peers.LastIndexes(ctx, addrs, handOffTimeout/2)
	best, highest := voters[0], uint64(0)
	for _, s := range voters {
		if i := last[string(s.ID)]; i > highest {
			best, highest = s, i
		}
	}
	return best, true
}
