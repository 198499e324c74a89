// Package stepdown is how a leader that cannot go on (its log store failed
// or stalled) gives its leadership away at once: it asks the most
// up-to-date other voter to stand for election now, with Raft's TimeoutNow.
//
// TimeoutNow is the last step of a leadership transfer, which the node sends
// itself because Raft's own transfer runs on the main loop, the goroutine a
// stalled write holds. A follower told so starts an election without a
// pre-vote, and the others grant their votes although they still heard from
// this leader (the request says it is a transfer). It is only a head start:
// if it fails, the followers elect a leader anyway once the node is silent.
package stepdown

import (
	"context"
	"time"

	"github.com/hashicorp/raft"
)

// Timeout bounds a step-down's hand-over: past it, the node goes on stopping and the
// followers elect a leader when their heartbeat timeout runs out.
const Timeout = time.Second

// Transport is the part of the Raft transport a step-down sends through.
type Transport interface {
	LocalAddr() raft.ServerAddress
	EncodePeer(id raft.ServerID, addr raft.ServerAddress) []byte
	TimeoutNow(id raft.ServerID, target raft.ServerAddress, args *raft.TimeoutNowRequest, resp *raft.TimeoutNowResponse) error
}

// Best picks, of voters (at least one), the one with the highest last index
// (last, by id), the first when none answered.
func Best(voters []raft.Server, last map[string]uint64) raft.Server {
	best, highest := voters[0], uint64(0)
	for _, s := range voters {
		if i := last[string(s.ID)]; i > highest {
			best, highest = s, i
		}
	}
	return best
}

// Send asks target to stand for election now, on behalf of the node self,
// through trans. It returns ctx's error if ctx ends first.
func Send(ctx context.Context, trans Transport, self raft.ServerID, target raft.Server) error {
	req := &raft.TimeoutNowRequest{RPCHeader: raft.RPCHeader{
		ProtocolVersion: raft.ProtocolVersionMax,
		ID:              []byte(self),
		Addr:            trans.EncodePeer(self, trans.LocalAddr()),
	}}
	done := make(chan error, 1)
	go func() { done <- trans.TimeoutNow(target.ID, target.Address, req, &raft.TimeoutNowResponse{}) }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}
