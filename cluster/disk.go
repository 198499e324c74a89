package cluster

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/hashicorp/raft"

	"github.com/fencer-io/fencer/cluster/internal/stepdown"
	"github.com/fencer-io/fencer/cluster/stall"
)

// A node whose disk stalls or fails must not keep leading: cluster/stall
// times the log store's writes (its package doc says why and what the node
// does); this file is what the node does about it.

// ErrDiskStalled: the log store did not complete a write within the stall
// timeout while this node led.
var ErrDiskStalled = errors.New("log store write stalled")

// ErrDiskFailed: the log store failed a write.
var ErrDiskFailed = errors.New("log store write failed")

// diskFailed is the log store's report of a failed write. Raft steps a
// leader down by itself when its write fails; this node also hands the
// leadership over, so that the others need not wait out a heartbeat
// timeout, and then stops.
func (n *Node) diskFailed(err error) {
	n.metrics.LogWriteErrors.Inc()
	leading := n.raft != nil && n.raft.State() == raft.Leader
	n.diskOnce.Do(func() {
		n.log.Error("the log store failed a write: stopping this node. No entry that failed was replicated or answered. "+
			"Fix the disk (free space, if it is full) and restart the node: it catches up from the leader", "err", err, "leader", leading)
		go func() {
			if leading {
				n.handOff()
			}
			n.die(fmt.Errorf("%w: %v", ErrDiskFailed, err))
		}()
	})
}

// watchDisk stops a leader whose log write has stalled (see cluster/stall).
func (n *Node) watchDisk() {
	defer n.wg.Done()
	stall.Watch(n.logWatch, n.cfg.StallTimeout, n.stop, func() bool { return n.raft.State() == raft.Leader }, n.stallStepDown,
		func(pending time.Duration) {
			n.log.Warn("the log store has not completed a write; as a follower this node only falls behind until it does",
				"pending", pending.Round(time.Millisecond), "stall_timeout", n.cfg.StallTimeout)
		})
}

// stallStepDown gives up a leadership that cannot commit: the node hands
// it to the most up-to-date follower, severs its Raft transport so that
// the followers stop hearing heartbeats (and elect a leader even if the
// hand-off failed), and reports a fatal error so that the process exits.
func (n *Node) stallStepDown(pending time.Duration) {
	n.metrics.StallStepDowns.Inc()
	n.log.Error("stepping down: the log store has not completed a write within the stall timeout, so this leader cannot commit anything. "+
		"Handing leadership over and cutting this node's Raft connections; stopping the node. Restart it once the disk answers: it catches up from the leader",
		"pending", pending.Round(time.Millisecond), "stall_timeout", n.cfg.StallTimeout, "term", n.raft.CurrentTerm())
	n.handOff()
	n.trans.Sever()
	n.die(fmt.Errorf("%w: no write completed in %v while leading", ErrDiskStalled, pending.Round(time.Millisecond)))
}

// die delivers err on Fatal, the first time only: the process should exit.
func (n *Node) die(err error) {
	select {
	case n.fatal <- err:
	default: // one fatal error is enough
	}
}

// handOff asks the most up-to-date other voter to stand for election at
// once (see cluster/internal/stepdown). The most up-to-date voter is the one
// with the highest last index, asked over HTTP; without answers, the first
// voter.
func (n *Node) handOff() {
	ctx, cancel := context.WithTimeout(context.Background(), stepdown.Timeout)
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
	target := stepdown.Best(voters, n.peers.LastIndexes(ctx, addrs, stepdown.Timeout/2))
	switch err := stepdown.Send(ctx, n.trans, raft.ServerID(n.cfg.ID), target); {
	case errors.Is(err, context.DeadlineExceeded):
		n.log.Warn("handing leadership over timed out; the followers elect a leader once this node is silent", "to", target.ID)
	case err != nil:
		n.log.Warn("could not hand leadership over; the followers elect a leader once this node is silent", "to", target.ID, "err", err)
	default:
		n.log.Info("asked a follower to stand for election now", "to", target.ID)
	}
}
