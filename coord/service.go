package coord

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/fencer-io/fencer/cluster"
	"github.com/fencer-io/fencer/coord/events"
	"github.com/fencer-io/fencer/coord/internal/waitq"
	"github.com/fencer-io/fencer/coord/lease"
	"github.com/fencer-io/fencer/fsm"
	"github.com/fencer-io/fencer/fsm/entry"
)

// Config configures a Service. Zero values mean the defaults.
type Config struct {
	// Limits, checked by the leader before it proposes (concurrent acquires
	// may overshoot by the number in flight). Defaults: 1,000,000 held
	// locks, 100,000 per holder name, 100,000 waiters, 1,024 per lock.
	MaxLocks          int
	MaxLocksPerHolder int
	MaxWaiters        int
	MaxWaitersPerLock int
	// Limits of the fenced store, checked alike: value bytes in all
	// (default 256 MiB), keys (default 1,000,000), and value bytes whose
	// last writer is one principal (default 64 MiB, a quarter of the
	// total, so that no one ACL principal can fill the store; writes
	// without a principal, when there is no ACL, are not counted per
	// principal).
	MaxKVBytes             int64
	MaxKeys                int
	MaxKVBytesPerPrincipal int64

	// Events is the node's event history, observing the FSM since before
	// Raft started (events.New, fsm.FSM.Observe). Nil: New makes one, which
	// sees only what is applied after it.
	Events *events.History

	// GrantHistory is the grant history this node proposes when it leads
	// a cluster that has none yet (history.go); a cluster's settings are
	// fixed by the first such leader and changed only through the log.
	// Nil: propose none (tests of other things, tools).
	GrantHistory *entry.GrantHistorySettings

	// Clock is the leader's time for lease deadlines and wait limits.
	Clock  lease.Clock
	Logger *slog.Logger
	// Registry, when set, gets the service's metrics.
	Registry prometheus.Registerer
}

// Defaults of the fenced store's limits.
const (
	DefaultMaxKVBytes             = 256 << 20
	DefaultMaxKVBytesPerPrincipal = DefaultMaxKVBytes / 4
)

func (c Config) withDefaults() Config {
	def := func(v *int, d int) {
		if *v == 0 {
			*v = d
		}
	}
	def(&c.MaxLocks, 1_000_000)
	def(&c.MaxLocksPerHolder, 100_000)
	def(&c.MaxWaiters, 100_000)
	def(&c.MaxWaitersPerLock, 1024)
	def(&c.MaxKeys, 1_000_000)
	if c.MaxKVBytes == 0 {
		c.MaxKVBytes = DefaultMaxKVBytes
	}
	if c.MaxKVBytesPerPrincipal == 0 {
		c.MaxKVBytesPerPrincipal = DefaultMaxKVBytesPerPrincipal
	}
	if c.Clock == nil {
		c.Clock = lease.RealClock
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

// Service is one node's coordination layer. What a primitive needs on the
// leader is shared: the lease timers, the wait queues, and the view of
// leadership they belong to. On a follower it answers stale reads only.
type Service struct {
	raft   Raft
	fsm    *fsm.FSM
	cfg    Config
	log    *slog.Logger
	leases *lease.Timers
	// lockQueues and permitQueues count their waiters together in
	// queued.
	lockQueues   *waitq.Table[*entry.Acquire, fsm.AcquireResult]
	permitQueues *waitq.Table[*entry.SemAcquire, fsm.PermitResult]
	queued       atomic.Int64
	events       *events.History
	metrics      *metrics

	mu   sync.Mutex
	view view

	stop      chan struct{}
	wg        sync.WaitGroup
	closeOnce sync.Once
}

// view is the service's side of one view of leadership (Raft.Leadership).
type view struct {
	leader  bool
	changed <-chan struct{}
	ready   bool          // promoted: leases tracked, requests served
	readyCh chan struct{} // closed when ready
}

// New starts the coordination layer over a Raft node and the state machine
// it applies to, following the node's leadership until Close.
func New(r Raft, state *fsm.FSM, cfg Config) *Service {
	cfg = cfg.withDefaults()
	s := &Service{
		raft: r,
		fsm:  state,
		cfg:  cfg,
		log:  cfg.Logger,
		stop: make(chan struct{}),
	}
	s.lockQueues = waitq.New[*entry.Acquire, fsm.AcquireResult](&s.queued)
	s.permitQueues = waitq.New[*entry.SemAcquire, fsm.PermitResult](&s.queued)
	s.events = cfg.Events
	if s.events == nil {
		s.events = events.New(events.Config{})
		state.Observe(s.events)
	}
	s.leases = lease.New(cfg.Clock, s.expireTimer)
	s.metrics = newMetrics(s, cfg.Registry)
	leader, changed := r.Leadership()
	s.begin(leader, changed)
	s.wg.Add(1)
	go s.follow(changed)
	if cfg.GrantHistory != nil {
		go s.settleHistory(*cfg.GrantHistory)
	}
	return s
}

// Close stops following leadership and answers every waiter; it does not
// touch the Raft node.
func (s *Service) Close() {
	s.closeOnce.Do(func() {
		close(s.stop)
		s.wg.Wait()
		s.leases.Demote()
		s.failWaiters(cluster.ErrNoLeader)
	})
}

// follow begins a new view each time the current one ends.
func (s *Service) follow(changed <-chan struct{}) {
	defer s.wg.Done()
	for {
		select {
		case <-s.stop:
			return
		case <-changed:
		}
		var leader bool
		leader, changed = s.raft.Leadership()
		s.begin(leader, changed)
	}
}

// begin ends whatever the previous view held on the leader (timers stop,
// waiters are answered) and, on a leader, starts its promotion.
func (s *Service) begin(leader bool, changed <-chan struct{}) {
	s.mu.Lock()
	s.view = view{leader: leader, changed: changed, readyCh: make(chan struct{})}
	s.mu.Unlock()
	s.leases.Demote()
	if leader {
		s.failWaiters(fmt.Errorf("%w: leadership changed or the state was replaced; retry", cluster.ErrNoLeader))
		s.wg.Add(1)
		go s.promote(changed)
		return
	}
	s.failWaiters(cluster.ErrNotLeader)
}

// failWaiters answers every queued caller with err (leadership is lost).
func (s *Service) failWaiters(err error) {
	s.lockQueues.FailAll(err)
	s.permitQueues.FailAll(err)
}

// promote makes this leader serve: a Barrier, so that the FSM holds every
// entry committed by earlier leaders, then every held lease restarts at its
// full TTL (deadlines are not replicated, so a new leader cannot know how
// much of a lease was left: a lease may outlive its TTL across a failover,
// never end early), and only then are requests served.
func (s *Service) promote(changed <-chan struct{}) {
	defer s.wg.Done()
	for {
		err := s.raft.Barrier()
		if err == nil {
			break
		}
		s.log.Warn("barrier failed", "err", err)
		select {
		case <-s.stop:
			return
		case <-changed:
			return
		case <-time.After(100 * time.Millisecond):
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	select {
	case <-changed:
		return // a newer view began meanwhile
	default:
	}
	held := 0
	s.leases.Promote(s.fsm.Counts().Locks, timedLeases(s.fsm, &held))
	s.view.ready = true
	close(s.view.readyCh)
	s.log.Info("lock service ready", "held_locks", held, "applied_index", s.fsm.AppliedIndex())
}

// awaitLeader returns nil once this node leads and the service is promoted
// in the node's current view of leadership, cluster.ErrNotLeader on a
// follower, or an error when ctx ends first.
func (s *Service) awaitLeader(ctx context.Context) error {
	for {
		leader, changed := s.raft.Leadership()
		if !leader {
			return cluster.ErrNotLeader
		}
		s.mu.Lock()
		v := s.view
		s.mu.Unlock()
		if v.ready && v.changed == changed {
			return nil
		}
		ready := v.readyCh
		if v.ready {
			ready = nil // an older view's; wait for the next one
		}
		select {
		case <-ready:
		case <-time.After(50 * time.Millisecond): // the view may have moved on
		case <-ctx.Done():
			return fmt.Errorf("%w: leader not ready yet", cluster.ErrNoLeader)
		}
	}
}

// linearizable makes the local FSM safe to read linearizably. A ready leader
// has applied everything committed before its term (the Barrier in promote),
// and every write it acknowledged was applied before the acknowledgement; a
// quorum round (VerifyLeader) then proves no newer leader can have
// acknowledged anything. Entries committed but not yet acknowledged are
// concurrent with the read, so either answer is linearizable. (Waiting for
// the commit index instead would hang: no-op and barrier entries count in it
// but never reach the FSM.)
func (s *Service) linearizable(ctx context.Context) error {
	if err := s.awaitLeader(ctx); err != nil {
		return err
	}
	return s.raft.VerifyLeader()
}
