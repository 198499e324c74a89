package cluster

import (
	"fmt"
	"time"

	"github.com/hashicorp/raft"

	"github.com/fencer-io/fencer/cluster/internal/leadership"
)

// LeaderChanged returns a channel closed when the answer of Leader may have
// changed: Raft learned of a new leader or lost the one it knew, this node's
// leadership changed, or a handover began or ended. Whoever waits for a
// leader takes the channel before reading Leader, so that no change slips
// in between.
func (n *Node) LeaderChanged() <-chan struct{} { return n.leaderNotice.Changed() }

// observeLeader makes Raft's leader observations notify LeaderChanged.
func (n *Node) observeLeader() {
	obs := make(chan raft.Observation, 16)
	n.raft.RegisterObserver(raft.NewObserver(obs, false, func(o *raft.Observation) bool {
		_, ok := o.Data.(raft.LeaderObservation)
		return ok
	}))
	n.wg.Add(1)
	go func() {
		defer n.wg.Done()
		for {
			select {
			case <-n.stop:
				return
			case <-obs:
				// An observation dropped while the channel was full is
				// covered: waiters re-read Leader after each notice.
				n.leaderNotice.Notify()
			}
		}
	}()
}

// Handover hands this node's leadership to the most up-to-date voter before
// the node stops, so that a graceful stop costs clients no election, and
// returns once the node knows another member leads. From the start the node
// answers as one that knows no leader (IsLeader is false, Leader names
// none), so that its API holds new requests and forwards them to the new
// leader as soon as it is known; what it was already serving commits first
// (a Barrier), and whatever Raft refuses meanwhile comes back as
// ErrNotLeader, having done nothing. It does nothing on a follower or in a
// cluster without another voter, and gives up after twice the election
// timeout (the node then stops as a leader would crash). A node standing
// for election waits for the outcome first (up to twice the election
// timeout): one stopped as it is being elected would otherwise win and
// then stop as a crash does. So does a follower that knows no leader: a
// leader whose lease ran out in a stall is one, and is often elected again
// moments later. It reports whether it gave leadership away.
func (n *Node) Handover() (handed bool, err error) {
	leadership.AwaitElection(n.raft.State, n.raftKnowsLeader, n.LeaderChanged, n.stop, 2*n.cfg.ElectionTimeout)
	if n.raft.State() != raft.Leader || !n.hasOtherVoter() {
		return false, nil
	}
	start := time.Now()
	deadline := start.Add(2 * n.cfg.ElectionTimeout)
	n.handingOver.Store(true)
	n.leaderNotice.Notify()
	if err := n.raft.Barrier(n.cfg.ElectionTimeout).Error(); err != nil {
		n.log.Warn("handover: barrier failed; transferring anyway", "err", err)
	}
	barrier := time.Since(start)
	err = n.raft.LeadershipTransfer().Error()
	transfer := time.Since(start) - barrier
	n.handingOver.Store(false)
	n.leaderNotice.Notify()
	if err != nil && n.raft.State() == raft.Leader {
		return false, fmt.Errorf("leadership transfer (barrier %v, transfer %v): %w", barrier.Round(time.Millisecond), transfer.Round(time.Millisecond), translate(err))
	}
	for {
		changed := n.LeaderChanged()
		id, addr := n.Leader()
		if id != "" && id != n.cfg.ID && addr != "" {
			n.log.Info("handed leadership over", "to", id, "took", time.Since(start).Round(time.Millisecond),
				"barrier", barrier.Round(time.Millisecond), "transfer", transfer.Round(time.Millisecond))
			return true, nil
		}
		wait := time.Until(deadline)
		if wait <= 0 {
			return true, fmt.Errorf("%w: leadership transferred (barrier %v, transfer %v), but no new leader known after %v", ErrNoLeader,
				barrier.Round(time.Millisecond), transfer.Round(time.Millisecond), time.Since(start).Round(time.Millisecond))
		}
		select {
		case <-changed:
		case <-n.stop:
			return true, ErrNoLeader
		case <-time.After(min(wait, 50*time.Millisecond)): // a member's address may arrive without a notice
		}
	}
}

// raftKnowsLeader reports whether Raft knows a leader, whichever it is.
func (n *Node) raftKnowsLeader() bool {
	addr, _ := n.raft.LeaderWithID()
	return addr != ""
}

// FailoverBound is how long a failover normally takes at most: a follower
// notices a lost leader within one to three heartbeat timeouts (Raft checks
// at random intervals of one to two), and an election round that fails
// costs one to two election timeouts more. Requests that find no leader
// wait this long for one.
func (n *Node) FailoverBound() time.Duration {
	return 3*n.cfg.HeartbeatTimeout + 2*n.cfg.ElectionTimeout
}

// hasOtherVoter reports whether another voter could take over.
func (n *Node) hasOtherVoter() bool {
	cf := n.raft.GetConfiguration()
	if cf.Error() != nil {
		return false
	}
	for _, s := range cf.Configuration().Servers {
		if s.Suffrage == raft.Voter && string(s.ID) != n.cfg.ID {
			return true
		}
	}
	return false
}
