// Package cluster owns a fencer node's Raft instance: its stores, transport,
// bootstrap and joins, leadership changes, and the leader-only lease timers.
// It exposes a small API that the HTTP layer consumes and translates raft's
// errors into its own.
package cluster

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"

	"github.com/fencer-io/fencer/fsm"
)

// Node is one fencer cluster member.
type Node struct {
	cfg     Config
	log     *slog.Logger
	raftLog hclog.Logger // hashicorp/raft's own
	fsm     *fsm.FSM
	raft    *raft.Raft
	store   *raftboltdb.BoltStore // the log and stable store
	logs    raft.LogStore         // store behind a cache of the newest entries
	snaps   raft.SnapshotStore
	trans   *raft.NetworkTransport

	leases  *Leases
	locks   *lockTable
	metrics *metrics

	leaderMu    sync.Mutex
	leaderGen   uint64        // bumped on every leadership change
	leaderReady chan struct{} // closed once this leader may serve locks
	isReady     bool

	ident    identity
	configMu sync.Mutex // one configuration change at a time
	format   entryFormat
	fatal    chan error

	peerHTTP *http.Client // for calls to other members' HTTP APIs

	ctx       context.Context // ends when the node stops
	cancel    context.CancelFunc
	stop      chan struct{}
	wg        sync.WaitGroup
	closeOnce sync.Once
}

// Open starts a node over state, the replicated state machine it applies
// the log to: it opens (or creates) the data dir, starts Raft, and bootstraps
// or joins as configured. It returns without waiting for a leader.
func Open(cfg Config, state *fsm.FSM) (*Node, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	n := &Node{
		cfg:         cfg,
		log:         cfg.Logger.With("node", cfg.ID),
		raftLog:     newRaftLogger(cfg),
		fsm:         state,
		leaderReady: make(chan struct{}),
		stop:        make(chan struct{}),
		fatal:       make(chan error, 1),
		// Node-to-node calls are rare (joins, probes, removals): a fresh
		// connection each, so none outlives a peer that restarted.
		peerHTTP: &http.Client{Transport: &http.Transport{TLSClientConfig: cfg.PeerTLSClient, DisableKeepAlives: true}},
	}
	n.ctx, n.cancel = context.WithCancel(context.Background())
	n.leases = NewLeases(cfg.Clock, n.expire)
	n.locks = newLockTable()
	n.metrics = newMetrics(n)
	if err := n.start(); err != nil {
		n.shutdown()
		return nil, err
	}
	n.wg.Add(1)
	go n.register()
	return n, nil
}

// ID returns the node's id.
func (n *Node) ID() string { return n.cfg.ID }

// RaftAddr returns the address the Raft transport advertises.
func (n *Node) RaftAddr() string { return string(n.trans.LocalAddr()) }

// HTTPAddr returns the node's advertised HTTP address.
func (n *Node) HTTPAddr() string { return n.cfg.HTTPAddr }

// FSM returns the node's state machine (read-only use).
func (n *Node) FSM() *fsm.FSM { return n.fsm }

// Raft returns the underlying raft instance, for tests and tools.
func (n *Node) Raft() *raft.Raft { return n.raft }

// Close shuts the node down: leadership work stops, raft shuts down, and
// the stores are closed. It does not leave the cluster.
func (n *Node) Close() error { return n.shutdown() }

// shutdown is the one way a node stops, whether Open failed part way or
// Close was called: it stops Raft and the node's goroutines, then closes
// the transport and the stores, skipping whatever was never opened.
func (n *Node) shutdown() error {
	var err error
	n.closeOnce.Do(func() {
		close(n.stop)
		n.cancel()
		if n.raft != nil {
			err = n.raft.Shutdown().Error()
		}
		n.leases.Demote()
		n.locks.failAll(ErrNoLeader)
		n.wg.Wait()
		if n.trans != nil {
			n.trans.Close()
		}
		if n.store != nil {
			n.store.Close()
		}
	})
	return err
}

// watchLeadership follows raft's leadership notifications. On gaining
// leadership it runs a Barrier, so that the FSM holds every entry committed by
// earlier leaders, then restarts every lease at its full TTL, and only then
// opens the node for lock requests. On losing it, every timer and waiter is
// dropped.
func (n *Node) watchLeadership(notify <-chan bool) {
	defer n.wg.Done()
	for {
		select {
		case <-n.stop:
			return
		case leader := <-notify:
			n.metrics.leaderChanges.Inc()
			n.leaderMu.Lock()
			n.leaderGen++
			gen := n.leaderGen
			if n.isReady {
				n.isReady = false
				n.leaderReady = make(chan struct{})
			}
			n.leaderMu.Unlock()
			if leader {
				n.log.Info("became leader; barrier before serving", "term", n.raft.CurrentTerm())
				n.wg.Add(1)
				go n.promote(gen)
			} else {
				n.log.Info("lost leadership")
				n.leases.Demote()
				n.locks.failAll(ErrNotLeader)
			}
		}
	}
}

func (n *Node) promote(gen uint64) {
	defer n.wg.Done()
	for {
		err := n.raft.Barrier(n.cfg.ApplyTimeout).Error()
		if err == nil {
			break
		}
		n.log.Warn("barrier failed", "err", err)
		if n.raft.State() != raft.Leader {
			return
		}
		select {
		case <-n.stop:
			return
		case <-time.After(100 * time.Millisecond):
		}
	}
	if n.fsm.ClusterID() == "" {
		if _, err := n.apply(&fsm.SetClusterID{ID: newSecret()[:16]}); err != nil {
			n.log.Warn("naming the cluster failed", "err", err)
			return
		}
	}
	n.leaderMu.Lock()
	defer n.leaderMu.Unlock()
	if gen != n.leaderGen || n.raft.State() != raft.Leader {
		return
	}
	held := n.leases.PromoteFrom(n.fsm)
	n.isReady = true
	close(n.leaderReady)
	n.log.Info("leader ready", "held_locks", held, "applied_index", n.fsm.AppliedIndex())
}

// awaitLeader returns nil once this node is a leader ready to serve locks,
// ErrNotLeader if it is a follower, or the context's error.
func (n *Node) awaitLeader(ctx context.Context) error {
	for {
		if n.raft.State() != raft.Leader {
			return ErrNotLeader
		}
		n.leaderMu.Lock()
		ready, ch := n.isReady, n.leaderReady
		n.leaderMu.Unlock()
		if ready {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return fmt.Errorf("%w: leader not ready yet", ErrNoLeader)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// IsLeader reports whether this node is the leader and ready to serve.
func (n *Node) IsLeader() bool {
	if n.raft.State() != raft.Leader {
		return false
	}
	n.leaderMu.Lock()
	defer n.leaderMu.Unlock()
	return n.isReady
}

// Leader returns the current leader's id and HTTP address, if known.
func (n *Node) Leader() (id, httpAddr string) {
	addr, sid := n.raft.LeaderWithID()
	if sid == "" {
		return "", ""
	}
	if m, ok := n.fsm.Member(string(sid)); ok && m.RaftAddr == string(addr) {
		return string(sid), m.HTTPAddr
	}
	return string(sid), n.initialHTTPAddr(string(sid), string(addr))
}

// apply proposes one command and returns the FSM's result. A refusal by the
// FSM comes back as the error.
func (n *Node) apply(cmd fsm.Command) (any, error) {
	data, err := fsm.EncodeFormat(cmd, n.entryFormat())
	if err != nil {
		return nil, err
	}
	f := n.raft.Apply(data, n.cfg.ApplyTimeout)
	if err := f.Error(); err != nil {
		return nil, translate(err)
	}
	if err, ok := f.Response().(error); ok {
		return nil, err
	}
	return f.Response(), nil
}

// linearizable makes the local FSM safe to read linearizably. A ready leader
// has applied everything committed before its term (the Barrier in promote),
// and every write it acknowledged was applied before the acknowledgement; a
// quorum round (VerifyLeader) then proves no newer leader can have
// acknowledged anything. Entries committed but not yet acknowledged are
// concurrent with the read, so either answer is linearizable. (Waiting for
// the commit index instead would hang: no-op and barrier entries count in it
// but never reach the FSM.)
func (n *Node) linearizable(ctx context.Context) error {
	if err := n.awaitLeader(ctx); err != nil {
		return err
	}
	return translate(n.raft.VerifyLeader().Error())
}

// Ready reports whether a leader is known and this node has applied up to
// its commit index.
func (n *Node) Ready() bool {
	if id, addr := n.Leader(); id == "" || addr == "" {
		return false
	}
	return n.raft.AppliedIndex() >= n.raft.CommitIndex()
}

// Status is a snapshot of the node's view of the cluster.
type Status struct {
	ID           string
	State        string
	Leader       string
	Term         uint64
	CommitIndex  uint64
	AppliedIndex uint64
	LastIndex    uint64
	LastContact  string
	Epoch        uint64
	LastToken    uint64
	ClusterID    string
	// LogFormat is the entry format this node would write as leader: the
	// newest that every member has recorded.
	LogFormat int
	Members   []MemberStatus
}

// MemberStatus is one member as seen by this node.
type MemberStatus struct {
	ID       string
	RaftAddr string
	HTTPAddr string
	Voter    bool
	Leader   bool
	// LogFormat is the newest entry format the member's build reads, as it
	// recorded when it registered.
	LogFormat int
}

// Status returns this node's view of the cluster.
func (n *Node) Status() (Status, error) {
	stats := n.raft.Stats()
	leaderID, _ := n.Leader()
	st := Status{
		ID:           n.cfg.ID,
		State:        n.raft.State().String(),
		Leader:       leaderID,
		Term:         parseUint(stats["term"]),
		CommitIndex:  n.raft.CommitIndex(),
		AppliedIndex: n.fsm.AppliedIndex(),
		LastIndex:    n.raft.LastIndex(),
		LastContact:  stats["last_contact"],
		Epoch:        n.fsm.Epoch(),
		ClusterID:    n.fsm.ClusterID(),
		LastToken:    n.fsm.LastToken(),
		LogFormat:    n.entryFormat(),
	}
	cf := n.raft.GetConfiguration()
	if err := cf.Error(); err != nil {
		return st, translate(err)
	}
	for _, s := range cf.Configuration().Servers {
		ms := MemberStatus{
			ID:       string(s.ID),
			RaftAddr: string(s.Address),
			Voter:    s.Suffrage == raft.Voter,
			Leader:   string(s.ID) == leaderID,
		}
		if m, ok := n.fsm.Member(ms.ID); ok {
			ms.HTTPAddr, ms.LogFormat = m.HTTPAddr, m.LogFormat
		} else {
			ms.HTTPAddr = n.initialHTTPAddr(ms.ID, ms.RaftAddr)
		}
		st.Members = append(st.Members, ms)
	}
	return st, nil
}

func parseUint(s string) uint64 {
	v, _ := strconv.ParseUint(s, 10, 64)
	return v
}

// WaitForLeader polls until some leader is known or the deadline passes.
func (n *Node) WaitForLeader(timeout time.Duration) (string, error) {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if id, _ := n.Leader(); id != "" {
			return id, nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	return "", ErrNoLeader
}

// Digest returns the applied index and a hash of the replicated state, both
// from one copy of the state.
func (n *Node) Digest() (uint64, string) {
	return n.fsm.DigestAt()
}

// initialHTTPAddr is a member's HTTP address from --initial-cluster: until
// the member's own record is replicated, that list already says where
// everybody is.
func (n *Node) initialHTTPAddr(id, raftAddr string) string {
	for _, p := range n.cfg.InitialCluster {
		if p.ID == id && p.RaftAddr == raftAddr {
			return p.HTTPAddr
		}
	}
	return ""
}
