// Package cluster is a fencer node's Raft member and nothing else: its
// stores, transport and startup, membership (bootstrap, join, removal), the
// entry-format gate, backup and restore.
//
// It knows nothing of locks: the coordination layer (coord) reaches it
// through Apply, VerifyLeader, Barrier and Leadership, and Raft's errors come
// back as this package's. The data dir on disk (datadir), the Raft transport
// (transport), offline forced recovery (recovery), Raft's metrics
// (raftmetrics), the join plan (internal/membership), the calls to other
// members (internal/peers), the entry-format gate (internal/logformat), the
// restore plan (internal/restore), the view of its own leadership
// (internal/leadership), Raft's logger (internal/raftlog) and a failing
// leader's step-down (internal/stepdown) are subpackages.
package cluster

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/fencer-io/fencer/api/wire"
	"github.com/fencer-io/fencer/cluster/datadir"
	"github.com/fencer-io/fencer/cluster/internal/leadership"
	"github.com/fencer-io/fencer/cluster/internal/logformat"
	"github.com/fencer-io/fencer/cluster/internal/peers"
	"github.com/fencer-io/fencer/cluster/internal/raftlog"
	"github.com/fencer-io/fencer/cluster/logstore"
	"github.com/fencer-io/fencer/cluster/raftmetrics"
	"github.com/fencer-io/fencer/cluster/stall"
	"github.com/fencer-io/fencer/cluster/transport"
	"github.com/fencer-io/fencer/fsm"
	"github.com/fencer-io/fencer/fsm/entry"
)

// Node is one fencer cluster member.
type Node struct {
	cfg     Config
	log     *slog.Logger
	raftLog hclog.Logger // hashicorp/raft's own
	fsm     *fsm.FSM
	raft    *raft.Raft
	dirLock *datadir.Lock  // held while the node runs
	store   logstore.Store // the log and stable store
	logs    raft.LogStore  // logWatch behind a cache of the newest entries
	// logWatch is the store as a log store, its writes timed and watched.
	logWatch *stall.Log
	snaps    raft.SnapshotStore
	trans    *transport.Transport

	reg     *prometheus.Registry // the node's metrics; others add theirs
	metrics *raftmetrics.Metrics
	lead    *leadership.View
	// handingOver: Handover is giving this node's leadership away; the
	// node answers as one that knows no leader meanwhile.
	handingOver  atomic.Bool
	leaderNotice leadership.Notice

	// bootstrapped: this process wrote a new cluster's first
	// configuration; as that cluster's first leader it records the
	// members' format before it names the cluster (recordBootstrap).
	bootstrapped atomic.Bool
	// caughtUp: this process has applied up to the commit index once
	// (Ready).
	caughtUp atomic.Bool
	// catchUp is the leader's commit index when this process first asked
	// (0: not asked yet), what it must apply before it is first ready.
	catchUp atomic.Uint64

	ident    datadir.Identity
	configMu sync.Mutex      // one configuration change at a time
	format   *logformat.Gate // the entry format Apply writes
	fatal    chan error
	diskOnce sync.Once // a failed write is acted on once

	peers *peers.Client // calls to other members' HTTP APIs
	// memberKey is the public half of the node's member key
	// (wire.MemberKeyString), which it registers with the cluster.
	memberKey string
	// keyJoined: a join that sent memberKey was accepted (keyRecorded).
	keyJoined atomic.Bool

	ctx       context.Context // ends when the node stops
	cancel    context.CancelFunc
	stop      chan struct{}
	raftDown  chan struct{} // closed once Raft has shut down
	wg        sync.WaitGroup
	closeOnce sync.Once
	// proposing counts the Apply and Barrier calls waiting on Raft, which
	// shutdown lets finish before it stops Raft (see drainProposals).
	proposing atomic.Int64
}

// Open starts a node over state, the replicated state machine it applies
// the log to: it opens (or creates) the data dir, starts Raft, and bootstraps
// or joins as configured. It returns without waiting for a leader.
func Open(cfg Config, state *fsm.FSM) (*Node, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	n := &Node{
		cfg:      cfg,
		log:      cfg.Logger.With("node", cfg.ID),
		raftLog:  raftlog.New(cfg.ID, cfg.RaftLogLevel),
		fsm:      state,
		stop:     make(chan struct{}),
		raftDown: make(chan struct{}),
		fatal:    make(chan error, 1),
	}
	n.format = logformat.New(n.configuration, state.Member)
	n.ctx, n.cancel = context.WithCancel(context.Background())
	n.lead = leadership.NewView()
	// Each node has its own registry, so that several nodes in one process
	// (tests, fencer dev) do not collide.
	n.reg = prometheus.NewRegistry()
	n.reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	n.metrics = raftmetrics.New(n.reg)
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
		if n.trans != nil {
			n.trans.StopWaiting() // Shutdown waits for replication a wait would hold
		}
		n.drainProposals(proposalDrain)
		if n.raft != nil {
			err = n.raft.Shutdown().Error()
		}
		close(n.raftDown) // answers what Raft left unanswered (await)
		n.wg.Wait()
		if n.peers != nil {
			n.peers.CloseIdle()
		}
		n.lead.Begin(false) // a stopped node leads nothing
		if n.trans != nil {
			n.trans.Close()
		}
		if n.store != nil {
			n.store.Close()
		}
		n.dirLock.Release()
	})
	return err
}

// Registry returns the node's metrics registry; the coordination layer and
// the HTTP layer register their own metrics there, and the HTTP layer serves
// it on /metrics.
func (n *Node) Registry() *prometheus.Registry { return n.reg }

// Leader returns the current leader's id and HTTP address, if known. A
// node handing its leadership over names none until it knows the next
// leader (see Handover).
func (n *Node) Leader() (id, httpAddr string) {
	addr, sid := n.raft.LeaderWithID()
	if sid == "" || string(sid) == n.cfg.ID && n.handingOver.Load() {
		return "", ""
	}
	if m, ok := n.fsm.Member(string(sid)); ok && m.RaftAddr == string(addr) {
		return string(sid), m.HTTPAddr
	}
	return string(sid), n.initialHTTPAddr(string(sid), string(addr))
}

// Apply proposes one command, in the entry format every member reads, and
// returns the FSM's result. A refusal by the FSM comes back as the error;
// Raft's errors come back as this package's.
func (n *Node) Apply(cmd entry.Command) (any, error) {
	data, err := n.format.Encode(cmd)
	if err != nil {
		if verr := n.VerifyLeader(); verr != nil {
			return nil, verr // the gate's view of the members may be a deposed leader's
		}
		return nil, err
	}
	if !n.enterProposal() {
		return nil, translate(raft.ErrRaftShutdown)
	}
	defer n.proposing.Add(-1)
	f := n.raft.Apply(data, n.cfg.ApplyTimeout)
	if err := n.await(f, ErrOutcomeUnknown); err != nil {
		if failed := n.logWatch.Failure(); failed != nil && translate(err) == err && !errors.Is(err, ErrOutcomeUnknown) {
			// The leader's own write failed before it replicated the
			// entry: not committed, and the node is stopping.
			return nil, fmt.Errorf("%w: this node's log store failed a write: %v", ErrNoLeader, failed)
		}
		return nil, translate(err)
	}
	if err, ok := f.Response().(error); ok {
		return nil, err
	}
	return f.Response(), nil
}

// EntryFormat is the log format Apply writes now: the newest every member
// has recorded.
func (n *Node) EntryFormat() int { return n.format.Format() }

// VerifyLeader confirms with a quorum round that this node still leads. A
// round that ends in a lost leadership means only that: the node does not
// lead (ErrNotLeader, so that the request goes to the leader), for nothing
// was proposed whose outcome could be unknown.
func (n *Node) VerifyLeader() error {
	err := n.await(n.raft.VerifyLeader(), ErrNoLeader)
	if errors.Is(err, raft.ErrLeadershipLost) {
		return fmt.Errorf("%w: %v", ErrNotLeader, err)
	}
	return translate(err)
}

// Barrier returns once the FSM has applied every entry committed before the
// call.
func (n *Node) Barrier() error {
	if !n.enterProposal() {
		return translate(raft.ErrRaftShutdown)
	}
	defer n.proposing.Add(-1)
	return translate(n.await(n.raft.Barrier(n.cfg.ApplyTimeout), ErrNoLeader))
}

// await returns f's answer, or past the proposal bound (ApplyTimeout from
// the call) or once Raft has shut down, an error wrapping unanswered:
// ErrOutcomeUnknown for a command, which may still commit; ErrNoLeader for
// a barrier or a quorum round, which change nothing. Raft answers a future
// only once its entry is applied or its leadership lost, so without a bound
// a request to a leader whose disk stalls waited until the node stopped,
// and one queued in Raft's apply channel as Raft shut down waited for ever.
// The wait costs a goroutine per proposal (hashicorp/raft's futures offer
// no channel to select on).
func (n *Node) await(f raft.Future, unanswered error) error {
	done := make(chan error, 1)
	go func() { done <- f.Error() }()
	bound := time.NewTimer(n.cfg.ApplyTimeout)
	defer bound.Stop()
	select {
	case err := <-done:
		return err
	case <-bound.C:
		return fmt.Errorf("%w: no answer from raft within %v (a stalled disk, or no quorum)", unanswered, n.cfg.ApplyTimeout)
	case <-n.raftDown:
		return fmt.Errorf("%w: raft shut down with the request in flight", unanswered)
	}
}

// proposalDrain bounds how long a stopping node waits for its proposals in
// flight. A leader that cannot commit answers them within its leader lease
// (it steps down, and Raft fails what it had in flight); a stalled disk is
// the case the bound is for.
const proposalDrain = 2 * time.Second

// enterProposal counts a proposal in, or reports that the node is stopping
// (the caller must not propose, and must not count itself out). Counting in
// before looking at n.stop means that shutdown, which closes n.stop before
// it waits, sees every proposal that went ahead.
func (n *Node) enterProposal() bool {
	n.proposing.Add(1)
	select {
	case <-n.stop:
		n.proposing.Add(-1)
		return false
	default:
		return true
	}
}

// drainProposals waits, up to bound, for the proposals in flight to be
// answered while Raft still runs. Raft's apply channel is buffered
// (BatchApplyCh): a proposal queued there when Raft shuts down is never
// answered, and its caller (a lease timer's expiry, a promotion's Barrier,
// whose goroutines coord's Close waits for) would wait for ever.
func (n *Node) drainProposals(bound time.Duration) {
	deadline := time.Now().Add(bound)
	for n.proposing.Load() > 0 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if left := n.proposing.Load(); left > 0 {
		n.log.Warn("stopping with proposals unanswered", "proposals", left, "waited", bound)
	}
}

// Ready reports whether this node can serve every command the cluster's
// members read, and the log format they read (the gate's): a leader is
// known, this node has applied up to its commit index, the cluster is named
// (its first leader's own entries are applied), and every member of the
// configuration has recorded its format. The format is below this build's
// only in a real mixed-version upgrade, where some member recorded an older
// one; commands that need a newer format are refused until it is upgraded.
func (n *Node) Ready() (format int, err error) {
	if id, addr := n.Leader(); id == "" || addr == "" {
		return 0, fmt.Errorf("%w: no leader is known to %s", ErrNoLeader, n.cfg.ID)
	}
	if err := n.caughtUpOnce(); err != nil {
		return 0, err
	}
	if n.fsm.ClusterID() == "" {
		return 0, fmt.Errorf("%w: the cluster's first leader has not named it yet", ErrNoLeader)
	}
	format, unrecorded, err := n.format.Members()
	if err != nil {
		return 0, fmt.Errorf("%w: %s cannot read its configuration: %v", ErrNoLeader, n.cfg.ID, err)
	}
	if len(unrecorded) > 0 {
		return 0, fmt.Errorf("%w: members %s have not recorded which log format they read yet", ErrNoLeader, strings.Join(unrecorded, ", "))
	}
	return format, nil
}

// caughtUpOnce reports whether this process has applied what the leader
// had committed when it first asked (nil), or how far behind it is. A node
// that restarted is ready only once it has replayed what was committed
// before (its own commit index starts at 0 and grows batch by batch as the
// leader catches it up, so it says nothing of the leader's); after that a
// loaded follower a few entries behind is still ready (its /readyz flapped
// to 503 in 3 of 50 failover runs when every call compared indexes). A
// follower that cannot ask the leader (an older leader refuses the member
// signature) falls back to its own commit index, call by call.
func (n *Node) caughtUpOnce() error {
	if n.caughtUp.Load() {
		return nil
	}
	applied, target := n.raft.AppliedIndex(), n.raft.CommitIndex()
	if n.raft.State() != raft.Leader {
		if t := n.catchUp.Load(); t != 0 {
			target = max(target, t)
		} else if _, addr := n.Leader(); addr != "" {
			ctx, cancel := context.WithTimeout(n.ctx, time.Second)
			t, err := n.peers.CommitIndex(ctx, addr, time.Second)
			cancel()
			if err != nil {
				if applied < target {
					return fmt.Errorf("%w: %s has applied up to index %d of %d committed", ErrNoLeader, n.cfg.ID, applied, target)
				}
				return nil // not latched: the next call asks again
			}
			n.catchUp.Store(max(t, 1))
			target = max(target, t)
		}
	}
	if applied < target {
		return fmt.Errorf("%w: %s has applied up to index %d of the %d the leader had committed", ErrNoLeader, n.cfg.ID, applied, target)
	}
	n.caughtUp.Store(true)
	return nil
}

// Status returns this node's view of the cluster, as GET /v1/cluster
// answers it.
func (n *Node) Status() (wire.ClusterStatus, error) {
	stats := n.raft.Stats()
	leaderID, _ := n.Leader()
	st := wire.ClusterStatus{
		Node:         n.cfg.ID,
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
		LogFormat:    n.format.Format(),
	}
	if g, ok := n.fsm.GrantHistorySettings(); ok {
		st.GrantHistory = &wire.GrantHistorySettings{PerLock: g.PerLock, Global: g.Global}
	}
	cf := n.raft.GetConfiguration()
	if err := cf.Error(); err != nil {
		return st, translate(err)
	}
	st.Members = make([]wire.Member, 0, len(cf.Configuration().Servers))
	for _, s := range cf.Configuration().Servers {
		m := wire.Member{
			ID:       string(s.ID),
			RaftAddr: string(s.Address),
			Voter:    s.Suffrage == raft.Voter,
			Leader:   string(s.ID) == leaderID,
		}
		if rec, ok := n.fsm.Member(m.ID); ok {
			m.HTTPAddr, m.LogFormat = rec.HTTPAddr, rec.LogFormat
		} else {
			m.HTTPAddr = n.initialHTTPAddr(m.ID, m.RaftAddr)
		}
		st.Members = append(st.Members, m)
	}
	return st, nil
}

// MemberStatuses asks every member for its own view (state, term, commit
// and applied index, last contact), in parallel, and answers for itself
// without a request. It is what a page served by one node shows of the
// others, which the browser cannot ask itself (they are other origins).
// The members are asked with this node's credential (its certificate or
// the cluster secret), which may read status.
func (n *Node) MemberStatuses(ctx context.Context) (wire.MemberStatusList, error) {
	st, err := n.Status()
	if err != nil {
		return wire.MemberStatusList{}, err
	}
	return n.peers.Statuses(ctx, st), nil
}

func parseUint(s string) uint64 {
	v, _ := strconv.ParseUint(s, 10, 64)
	return v
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

// configuration is Raft's configuration, as the node's helpers read it.
func (n *Node) configuration() (raft.Configuration, error) {
	cf := n.raft.GetConfiguration()
	if err := cf.Error(); err != nil {
		return raft.Configuration{}, err
	}
	return cf.Configuration(), nil
}
