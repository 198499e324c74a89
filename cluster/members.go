package cluster

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/hashicorp/raft"

	"github.com/fencer-io/fencer/api/wire"
	"github.com/fencer-io/fencer/cluster/internal/peers"
	"github.com/fencer-io/fencer/fsm/entry"
)

// registered reports whether this node is in the Raft configuration and its
// addresses are recorded in the FSM, with its member key once every member
// can record one.
func (n *Node) registered() bool {
	m, ok := n.fsm.Member(n.cfg.ID)
	if !ok || m.HTTPAddr != n.cfg.HTTPAddr || m.RaftAddr != n.RaftAddr() || m.Incarnation != n.ident.Incarnation ||
		m.LogFormat != entry.LogFormat || n.keyMissing(m) {
		return false
	}
	cf := n.raft.GetConfiguration()
	if cf.Error() != nil {
		return false
	}
	for _, s := range cf.Configuration().Servers {
		if string(s.ID) == n.cfg.ID && string(s.Address) == n.RaftAddr() {
			return true
		}
	}
	return false
}

// keyMissing reports whether m, this node's record, lacks the node's
// member key while every member can record one: the node registers again
// to record it (after the last member of a rolling upgrade, or an
// operator's add that reset it).
func (n *Node) keyMissing(m entry.Member) bool {
	return m.Key != n.memberKey && n.format.Format() >= entry.LogFormatMemberKey
}

// keyRecorded reports whether this node's replica records its member key,
// or a join that sent it was accepted since the node started (its replica
// may not have the record yet): its signature is then the credential to
// present first.
func (n *Node) keyRecorded() bool {
	m, ok := n.fsm.Member(n.cfg.ID)
	return ok && m.Key == n.memberKey || n.keyJoined.Load()
}

// rekeyCheck is how often a registered node checks that its record holds
// its member key.
const rekeyCheck = 2 * time.Second

// awaitRekey waits, once the node is registered, until its record exists
// but lacks its key while every member can record one (then it registers
// again), or until the node stops (false). A record that is gone (the
// member was removed) is left gone.
func (n *Node) awaitRekey() bool {
	t := time.NewTicker(rekeyCheck)
	defer t.Stop()
	for {
		select {
		case <-n.stop:
			return false
		case <-t.C:
		}
		if m, ok := n.fsm.Member(n.cfg.ID); ok && n.keyMissing(m) {
			n.log.Info("registering this node's member key")
			return true
		}
	}
}

// register runs until this node is a member with its addresses recorded, by
// joining through the leader (itself, when it leads), and then registers
// again whenever its record lacks its member key. A refusal that retrying
// cannot fix is reported on Fatal.
func (n *Node) register() {
	defer n.wg.Done()
	backoff := 100 * time.Millisecond
	warned := false
	for {
		if n.registered() && n.rememberClusterID() {
			n.log.Debug("registered")
			if !n.awaitRekey() {
				return
			}
			backoff = 100 * time.Millisecond
			continue
		}
		err := n.joinOnce(true)
		if errors.Is(err, ErrMemberConflict) {
			n.log.Error("join refused", "err", err)
			n.die(err)
			return
		}
		// Until a member has registered, the cluster does not know its
		// incarnation and so cannot refuse it if its disk is wiped: keep
		// the wait short (a join is one small request).
		wait := backoff
		switch {
		case errors.Is(err, peers.ErrUnauthorized):
			// Only an operator can fix this (the same secret everywhere);
			// retrying fast would fill the leader's audit log.
			if !warned {
				n.log.Error("the cluster refuses this node's credential; retrying slowly", "err", err, "every", unauthorizedBackoff)
				warned = true
			}
			wait = unauthorizedBackoff
		case err != nil:
			n.log.Debug("join attempt failed; retrying", "err", err, "backoff", backoff)
		}
		select {
		case <-n.stop:
			return
		case <-time.After(wait):
		}
		backoff = min(2*backoff, 500*time.Millisecond)
	}
}

// unauthorizedBackoff is the wait between registrations the cluster refused
// as unauthorized.
const unauthorizedBackoff = 10 * time.Second

// preJoin asks the leader, before this node's Raft starts, whether it would
// admit the node (a dry run), retrying with backoff for up to JoinTimeout. A
// refusal is final: a wiped voter never starts Raft under its old id. The
// real join follows once Raft runs (register), since a voter added before it
// can answer would cost a small cluster its quorum.
func (n *Node) preJoin() error {
	deadline := time.Now().Add(n.cfg.JoinTimeout)
	backoff := 100 * time.Millisecond
	for {
		err := n.joinOnce(false)
		if err == nil {
			n.log.Info("the cluster would admit this node; starting raft")
			return nil
		}
		if errors.Is(err, ErrMemberConflict) || errors.Is(err, peers.ErrUnauthorized) {
			return fmt.Errorf("join refused: %w", err)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("could not join within %v: %w", n.cfg.JoinTimeout, err)
		}
		n.log.Debug("join attempt failed; retrying", "err", err, "backoff", backoff)
		time.Sleep(backoff) // backoff between attempts, not a wait for a state
		backoff = min(2*backoff, 2*time.Second)
	}
}

// joinOnce makes one join attempt through the leader (or, when self is set
// and this node leads, directly). Without self it is the dry run of
// preJoin.
func (n *Node) joinOnce(self bool) error {
	req := wire.JoinRequest{
		ID:          n.cfg.ID,
		RaftAddr:    n.RaftAddr(),
		HTTPAddr:    n.cfg.HTTPAddr,
		Voter:       !n.cfg.NonVoter,
		Incarnation: n.ident.Incarnation,
		LogFormat:   entry.LogFormat,
		ClusterID:   n.ident.ClusterID,
		Replace:     n.cfg.Replace,
		DryRun:      !self,
		MemberKey:   n.memberKey,
	}
	if self && n.IsLeader() {
		ctx, cancel := context.WithTimeout(n.ctx, n.cfg.ApplyTimeout)
		defer cancel()
		return n.Join(ctx, req)
	}
	var targets []string
	if self {
		if _, addr := n.Leader(); addr != "" {
			targets = append(targets, addr)
		}
	}
	targets = append(targets, n.peerHTTPAddrs()...)
	if len(targets) == 0 {
		return ErrNoLeader
	}
	err := n.peers.Join(n.ctx, targets, req)
	if err == nil && self {
		n.keyJoined.Store(true)
	}
	return err
}

// Fatal delivers an error after which the node cannot go on (a refused
// join); the process should exit.
func (n *Node) Fatal() <-chan error { return n.fatal }

// RemoveMember removes a member from the Raft configuration and forgets its
// addresses. Removing the leader itself transfers leadership first.
func (n *Node) RemoveMember(ctx context.Context, id string) error {
	conf, err := n.lockConfiguration(ctx)
	if err != nil {
		return err
	}
	defer n.configMu.Unlock()
	found := false
	for _, s := range conf.Servers {
		found = found || string(s.ID) == id
	}
	if !found {
		if _, ok := n.fsm.Member(id); !ok {
			return n.confirmed(fmt.Errorf("%w: %q", ErrUnknownMember, id))
		}
	}
	if id == n.cfg.ID {
		// The leader cannot remove itself cleanly: hand leadership over,
		// then ask the new leader to remove this node.
		n.log.Info("removing the leader: transferring leadership first", "id", id)
		if err := n.raft.LeadershipTransfer().Error(); err != nil {
			return translate(err)
		}
		n.configMu.Unlock()
		defer n.configMu.Lock()
		err := n.peers.RemoveSelf(ctx, id, n.Leader)
		if errors.Is(err, peers.ErrNoNewLeader) {
			return fmt.Errorf("%w: leadership moved but no new leader removed %s", ErrNoLeader, id)
		}
		return err
	}
	if found {
		if err := n.raft.RemoveServer(raft.ServerID(id), 0, n.cfg.ApplyTimeout).Error(); err != nil {
			return translate(err)
		}
	}
	_, err = n.Apply(&entry.RemoveMember{ID: id})
	n.format.Invalidate() // the gate may now read a newer format
	n.log.Info("member removed", "id", id)
	return err
}

// rememberClusterID records the cluster's id in the data dir once known, so
// that the dir is refused by any other cluster later. It reports whether
// there is nothing left to record.
func (n *Node) rememberClusterID() bool {
	id := n.fsm.ClusterID()
	if id == "" {
		return false
	}
	if n.ident.ClusterID == id {
		return true
	}
	if n.ident.ClusterID != "" {
		n.log.Error("data dir records another cluster id", "recorded", n.ident.ClusterID, "cluster", id)
		return true
	}
	ident := n.ident
	ident.ClusterID = id
	if err := ident.Save(n.cfg.DataDir); err != nil {
		n.log.Error("recording the cluster id failed", "err", err)
		return false
	}
	n.ident = ident
	return true
}

// peerHTTPAddrs lists the HTTP addresses of the members this node was
// told about.
func (n *Node) peerHTTPAddrs() []string {
	out := append([]string(nil), n.cfg.Join...)
	for _, p := range n.cfg.InitialCluster {
		if p.ID != n.cfg.ID {
			out = append(out, p.HTTPAddr)
		}
	}
	return out
}

// TransferLeadership hands leadership to the member id, or to the most
// up-to-date follower when id is empty.
func (n *Node) TransferLeadership(ctx context.Context, id string) error {
	if err := n.awaitLeader(ctx); err != nil {
		return err
	}
	if id == "" {
		return translate(n.raft.LeadershipTransfer().Error())
	}
	if id == n.cfg.ID {
		return nil // already leads
	}
	cf := n.raft.GetConfiguration()
	if err := cf.Error(); err != nil {
		return translate(err)
	}
	for _, s := range cf.Configuration().Servers {
		if string(s.ID) == id {
			if s.Suffrage != raft.Voter {
				return fmt.Errorf("%w: %q is not a voter", ErrMemberConflict, id)
			}
			n.log.Info("transferring leadership", "to", id)
			return translate(n.raft.LeadershipTransferToServer(s.ID, s.Address).Error())
		}
	}
	return fmt.Errorf("%w: %q", ErrUnknownMember, id)
}
