package cluster

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/raft"

	"github.com/fencer-io/fencer/fsm"
)

// JoinRequest asks the leader to make a node a member. It is also the body of
// POST /v1/cluster/join.
type JoinRequest struct {
	ID          string `json:"id"`
	RaftAddr    string `json:"raft_addr"`
	HTTPAddr    string `json:"http_addr"`
	Voter       bool   `json:"voter"`
	Incarnation string `json:"incarnation,omitempty"`
	// LogFormat is the newest entry format the joiner's build reads
	// (fsm.LogFormat*); zero from builds that predate it. It travels in the
	// LogFormatHeader, not the body, which older builds decode strictly.
	LogFormat int `json:"-"`
	// ClusterID is the cluster the joiner's data dir belongs to, if any.
	ClusterID string `json:"cluster_id,omitempty"`
	// Replace removes a member of the same id first, even when its data
	// dir was wiped (a new incarnation). The operator vouches that the old
	// incarnation is gone for good.
	Replace bool `json:"replace,omitempty"`
	// DryRun only asks whether the join would be accepted; nothing changes.
	DryRun bool `json:"dry_run,omitempty"`
}

// Join makes a node a member, idempotently: a member already present with the
// same id, address and incarnation is only confirmed; an entry that conflicts
// in address is removed first. A voter that comes back under its id with a
// new incarnation (a wiped data dir) is refused: it has forgotten votes and
// entries it acknowledged, and taking its vote back silently is unsafe.
func (n *Node) Join(ctx context.Context, req JoinRequest) error {
	if err := n.awaitLeader(ctx); err != nil {
		return err
	}
	if !idPattern.MatchString(req.ID) || req.RaftAddr == "" || req.HTTPAddr == "" {
		return fmt.Errorf("%w: join needs an id, a raft address and an http address", ErrMemberConflict)
	}
	if own := n.fsm.ClusterID(); req.ClusterID != "" && own != "" && req.ClusterID != own {
		return fmt.Errorf("%w: the data dir of %q belongs to cluster %s, this is cluster %s; "+
			"start it with an empty data dir to join this cluster", ErrMemberConflict, req.ID, req.ClusterID, own)
	}
	n.configMu.Lock()
	defer n.configMu.Unlock()
	if !req.DryRun {
		n.holdJSON()
	}
	cf := n.raft.GetConfiguration()
	if err := cf.Error(); err != nil {
		return translate(err)
	}
	known, _ := n.fsm.Member(req.ID)
	if req.DryRun {
		if !req.Replace && known.Incarnation != "" && req.Incarnation != "" && known.Incarnation != req.Incarnation {
			return n.wipedError(req, known)
		}
		return nil
	}
	if req.Replace && known.Incarnation != "" && known.Incarnation != req.Incarnation {
		n.log.Info("replacing member with a new incarnation", "id", req.ID, "old", known.Incarnation, "new", req.Incarnation)
		if err := n.raft.RemoveServer(raft.ServerID(req.ID), 0, n.cfg.ApplyTimeout).Error(); err != nil {
			return translate(err)
		}
		if _, err := n.apply(&fsm.RemoveMember{ID: req.ID}); err != nil {
			return err
		}
		if cf = n.raft.GetConfiguration(); cf.Error() != nil {
			return translate(cf.Error())
		}
		known = fsm.Member{}
	}
	present := false
	for _, s := range cf.Configuration().Servers {
		sameID, sameAddr := string(s.ID) == req.ID, string(s.Address) == req.RaftAddr
		if sameID && req.Incarnation != "" && known.Incarnation != "" && known.Incarnation != req.Incarnation {
			return n.wipedError(req, known)
		}
		switch {
		case sameID && sameAddr:
			present = true
			if req.Voter && s.Suffrage != raft.Voter {
				if err := n.raft.AddVoter(s.ID, s.Address, 0, n.cfg.ApplyTimeout).Error(); err != nil {
					return translate(err)
				}
			}
		case sameID || sameAddr:
			n.log.Info("removing conflicting member before join", "id", s.ID, "addr", s.Address, "joiner", req.ID)
			if err := n.raft.RemoveServer(s.ID, 0, n.cfg.ApplyTimeout).Error(); err != nil {
				return translate(err)
			}
		}
	}
	if !present {
		var f raft.IndexFuture
		if req.Voter {
			f = n.raft.AddVoter(raft.ServerID(req.ID), raft.ServerAddress(req.RaftAddr), 0, n.cfg.ApplyTimeout)
		} else {
			f = n.raft.AddNonvoter(raft.ServerID(req.ID), raft.ServerAddress(req.RaftAddr), 0, n.cfg.ApplyTimeout)
		}
		if err := f.Error(); err != nil {
			return translate(err)
		}
		n.log.Info("member added", "id", req.ID, "raft_addr", req.RaftAddr, "voter", req.Voter)
	}
	want := fsm.Member{ID: req.ID, RaftAddr: req.RaftAddr, HTTPAddr: req.HTTPAddr, Incarnation: req.Incarnation, LogFormat: req.LogFormat}
	if req.Incarnation == "" && req.LogFormat == 0 && known.RaftAddr == req.RaftAddr {
		// An operator's add (not the node itself) knows nothing of the
		// member's build: keep what the member recorded.
		want.LogFormat = known.LogFormat
	}
	if known == want {
		return nil
	}
	_, err := n.apply(&fsm.SetMember{Member: want})
	return err
}

// registered reports whether this node is in the Raft configuration and its
// addresses are recorded in the FSM.
func (n *Node) registered() bool {
	m, ok := n.fsm.Member(n.cfg.ID)
	if !ok || m.HTTPAddr != n.cfg.HTTPAddr || m.RaftAddr != n.RaftAddr() || m.Incarnation != n.ident.Incarnation ||
		m.LogFormat != fsm.LogFormat {
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

// register runs until this node is a member with its addresses recorded, by
// joining through the leader (itself, when it leads). A refusal that retrying
// cannot fix is reported on Fatal.
func (n *Node) register() {
	defer n.wg.Done()
	backoff := 100 * time.Millisecond
	for {
		if n.registered() && n.rememberClusterID() {
			n.log.Debug("registered")
			return
		}
		err := n.joinOnce(true)
		if errors.Is(err, ErrMemberConflict) {
			n.log.Error("join refused", "err", err)
			n.fatal <- err
			return
		}
		if err != nil {
			n.log.Debug("join attempt failed; retrying", "err", err, "backoff", backoff)
		}
		select {
		case <-n.stop:
			return
		case <-time.After(backoff):
		}
		// Until a member has registered, the cluster does not know its
		// incarnation and so cannot refuse it if its disk is wiped: keep
		// the wait short (a join is one small request).
		backoff = min(2*backoff, 500*time.Millisecond)
	}
}

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
		if errors.Is(err, ErrMemberConflict) {
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
// and this node leads, directly).
func (n *Node) joinOnce(self bool) error {
	req := JoinRequest{
		ID:          n.cfg.ID,
		RaftAddr:    n.RaftAddr(),
		HTTPAddr:    n.cfg.HTTPAddr,
		Voter:       !n.cfg.NonVoter,
		Incarnation: n.ident.Incarnation,
		LogFormat:   fsm.LogFormat,
		ClusterID:   n.ident.ClusterID,
		Replace:     n.cfg.Replace,
		DryRun:      !self,
	}
	if self && n.IsLeader() {
		ctx, cancel := context.WithTimeout(context.Background(), n.cfg.ApplyTimeout)
		defer cancel()
		return n.Join(ctx, req)
	}
	var targets []string
	if self {
		if _, addr := n.Leader(); addr != "" {
			targets = append(targets, addr)
		}
	}
	targets = append(targets, n.cfg.Join...)
	for _, p := range n.cfg.InitialCluster {
		if p.ID != n.cfg.ID {
			targets = append(targets, p.HTTPAddr)
		}
	}
	if len(targets) == 0 {
		return ErrNoLeader
	}
	var last error
	for _, addr := range targets {
		if last = n.postJoin(addr, req); last == nil || errors.Is(last, ErrMemberConflict) {
			return last
		}
	}
	return last
}

// postJoin sends a join request to a member's HTTP API, which forwards it to
// the leader.
func (n *Node) postJoin(addr string, req JoinRequest) error {
	body, _ := json.Marshal(req)
	hr, err := http.NewRequest(http.MethodPost, n.peerURL(addr)+"/v1/cluster/join", bytes.NewReader(body))
	if err != nil {
		return err
	}
	hr.Header.Set("Content-Type", "application/json")
	if req.LogFormat > 0 {
		hr.Header.Set(LogFormatHeader, strconv.Itoa(req.LogFormat))
	}
	resp, err := n.peerClient(10 * time.Second).Do(hr)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	switch {
	case resp.StatusCode == http.StatusOK:
		return nil
	case resp.StatusCode == http.StatusConflict:
		return fmt.Errorf("%w: %s", ErrMemberConflict, bytes.TrimSpace(msg))
	}
	return fmt.Errorf("join via %s: %s: %s", addr, resp.Status, bytes.TrimSpace(msg))
}

// peerURL is the base URL of another member's HTTP API.
func (n *Node) peerURL(addr string) string {
	if strings.HasPrefix(addr, "http://") || strings.HasPrefix(addr, "https://") {
		return addr
	}
	if n.cfg.PeerTLSClient != nil {
		return "https://" + addr
	}
	return "http://" + addr
}

// peerClient talks to other members' HTTP APIs, with the node's certificate
// when the cluster runs TLS (it then counts as an operator; see acl).
func (n *Node) peerClient(timeout time.Duration) *http.Client {
	c := &http.Client{Timeout: timeout}
	if n.cfg.PeerTLSClient != nil {
		c.Transport = &http.Transport{TLSClientConfig: n.cfg.PeerTLSClient}
	}
	return c
}

// Fatal delivers an error after which the node cannot go on (a refused
// join); the process should exit.
func (n *Node) Fatal() <-chan error { return n.fatal }

// RemoveMember removes a member from the Raft configuration and forgets its
// addresses. Removing the leader itself transfers leadership first.
func (n *Node) RemoveMember(ctx context.Context, id string) error {
	if err := n.awaitLeader(ctx); err != nil {
		return err
	}
	n.configMu.Lock()
	defer n.configMu.Unlock()
	cf := n.raft.GetConfiguration()
	if err := cf.Error(); err != nil {
		return translate(err)
	}
	found := false
	for _, s := range cf.Configuration().Servers {
		found = found || string(s.ID) == id
	}
	if !found {
		if _, ok := n.fsm.Member(id); !ok {
			return fmt.Errorf("%w: %q", ErrUnknownMember, id)
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
		return n.removeViaNewLeader(ctx, id)
	}
	if found {
		if err := n.raft.RemoveServer(raft.ServerID(id), 0, n.cfg.ApplyTimeout).Error(); err != nil {
			return translate(err)
		}
	}
	_, err := n.apply(&fsm.RemoveMember{ID: id})
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
	if err := saveIdentity(n.cfg.DataDir, ident); err != nil {
		n.log.Error("recording the cluster id failed", "err", err)
		return false
	}
	n.ident = ident
	return true
}

// peerAddrsToProbe lists the HTTP addresses of the members this node was
// told about.
func (n *Node) peerAddrsToProbe() []string {
	out := append([]string(nil), n.cfg.Join...)
	for _, p := range n.cfg.InitialCluster {
		if p.ID != n.cfg.ID {
			out = append(out, p.HTTPAddr)
		}
	}
	return out
}

// probeExisting asks the members this node was told about whether a cluster
// already runs, and which. A node whose data dir is empty but whose peers
// already have a leader must join rather than bootstrap: bootstrapping again
// would give it a fresh vote in a cluster that may count on what it
// acknowledged before. It returns the first cluster id a peer reports.
func (n *Node) probeExisting() (running bool, clusterID string) {
	client := n.peerClient(time.Second)
	for _, addr := range n.peerAddrsToProbe() {
		resp, err := client.Get(n.peerURL(addr) + "/v1/cluster")
		if err != nil {
			continue
		}
		var st struct {
			Leader    string `json:"leader"`
			ClusterID string `json:"cluster_id"`
		}
		err = json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&st)
		resp.Body.Close()
		if err == nil && (st.Leader != "" || st.ClusterID != "") {
			return st.Leader != "", st.ClusterID
		}
	}
	return false, ""
}

func (n *Node) wipedError(req JoinRequest, known fsm.Member) error {
	return fmt.Errorf("%w: member %q is in the cluster with another data dir (incarnation %s, now %s); "+
		"its disk was wiped or replaced, and a Raft voter must not forget what it acknowledged. "+
		"Remove it first (fencer members remove %s) and start it again, or start it with --replace",
		ErrMemberConflict, req.ID, known.Incarnation, req.Incarnation, req.ID)
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

// removeViaNewLeader asks the leader that took over from this node to remove
// it, retrying until a new leader answers or ctx ends.
func (n *Node) removeViaNewLeader(ctx context.Context, id string) error {
	client := n.peerClient(10 * time.Second)
	for {
		if leaderID, addr := n.Leader(); leaderID != "" && leaderID != n.cfg.ID && addr != "" {
			req, _ := http.NewRequestWithContext(ctx, http.MethodDelete, n.peerURL(addr)+"/v1/cluster/members/"+id, nil)
			resp, err := client.Do(req)
			if err == nil {
				msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
				resp.Body.Close()
				if resp.StatusCode == http.StatusOK {
					return nil
				}
				if resp.StatusCode != http.StatusServiceUnavailable {
					return fmt.Errorf("new leader %s refused the removal: %s: %s", leaderID, resp.Status, bytes.TrimSpace(msg))
				}
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w: leadership moved but no new leader removed %s", ErrNoLeader, id)
		case <-time.After(100 * time.Millisecond):
		}
	}
}
