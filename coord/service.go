package coord

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/fencer-io/fencer/cluster"
	"github.com/fencer-io/fencer/coord/events"
	"github.com/fencer-io/fencer/coord/internal/leadership"
	"github.com/fencer-io/fencer/coord/internal/metrics"
	"github.com/fencer-io/fencer/coord/internal/timed"
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
	// MaxSessions bounds the open sessions (default 100,000): each is a
	// lease the leader times.
	MaxSessions int
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
	def(&c.MaxSessions, 100_000)
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
	raft Raft
	fsm  *fsm.FSM
	cfg  Config
	log  *slog.Logger
	// timers time every grant's lease and every lock-delay (coord/lease).
	timers *lease.Timers
	// locks and sems are the grant engine of each kind (engine.go); their
	// wait queues count their waiters together in queued.
	locks *engine[*entry.Acquire, fsm.AcquireResult]
	sems  *engine[*entry.SemAcquire, fsm.PermitResult]
	// kinds are the engines, registered in New; onTimer is what a timer
	// key's kind does when its deadline passes.
	kinds   []grantKind
	onTimer map[lease.Kind]func(name string, token uint64)
	queued  atomic.Int64
	ready   readyMultis // multi-waiters to try granting (multiwait.go)
	events  *events.History
	metrics *metrics.Counters

	// leader follows the node's views of leadership: leader-only work
	// (timers, waiters) belongs to one view.
	leader *leadership.Follower

	stop      chan struct{}
	closeOnce sync.Once
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
	s.locks = newEngine(s, fsm.KindLock, "lock", policy[*entry.Acquire, fsm.AcquireResult](lockPolicy{s}))
	s.sems = newEngine(s, fsm.KindSemaphore, "semaphore", policy[*entry.SemAcquire, fsm.PermitResult](semPolicy{s}))
	s.onTimer = map[lease.Kind]func(string, uint64){}
	s.register(s.locks)
	s.register(s.sems)
	// A session's lease times its grants (sessions.go); its key's id is
	// the session's.
	s.onTimer[timed.Session] = func(_ string, id uint64) { s.expireSession(id) }
	// A multi-grant's one lease (multilocks.go); its key's id is its token.
	s.onTimer[timed.MultiLease] = func(_ string, token uint64) { s.expireMulti(token) }
	s.events = cfg.Events
	if s.events == nil {
		s.events = events.New(events.Config{})
		state.Observe(s.events)
	}
	s.timers = lease.New(cfg.Clock, s.expireTimer)
	s.metrics = metrics.New(cfg.Registry, s.gauges)
	s.leader = leadership.Follow(r, leadership.Hooks{End: s.endView, Prepare: s.prepare, Promote: s.promote}, s.log)
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
		s.leader.Close()
		s.timers.Demote()
		s.failWaiters(cluster.ErrNoLeader)
	})
}

// endView ends whatever the previous view held on the leader: timers stop,
// waiters are answered with err.
func (s *Service) endView(err error) {
	s.timers.Demote()
	s.failWaiters(err)
}

// register adds an engine: its grants' leases expire through it, and its
// lock-delays end through it, when their timers fire.
func (s *Service) register(e grantKind) {
	s.kinds = append(s.kinds, e)
	grants, delay, wait := e.timerKinds()
	for _, grant := range grants {
		s.onTimer[grant] = e.expire
	}
	s.onTimer[delay] = e.endDelay
	s.onTimer[wait] = e.expireWait
}

// expireTimer is called by the timers when a deadline passes, with the key
// it was timed under: a grant's lease or a lock-delay.
func (s *Service) expireTimer(key lease.Key, token uint64) {
	if fire, ok := s.onTimer[key.Kind]; ok {
		fire(key.Name, token)
	}
}

// failWaiters answers every queued caller with err (leadership is lost).
func (s *Service) failWaiters(err error) {
	for _, e := range s.kinds {
		e.failWaiters(err)
	}
}

// promote starts a new leader's service once its FSM holds every entry
// committed before its view: every held lease restarts at its full TTL
// (deadlines are not replicated, so a new leader cannot know how much of a
// lease was left: a lease may outlive its TTL across a failover, never end
// early).
func (s *Service) promote() {
	held := 0
	s.timers.Promote(s.fsm.Counts().Locks, timed.All(s.fsm, &held))
	// Durable waiters keep their places, ahead of any new arrival: nobody
	// is served before Promote returns.
	waiters := s.fsm.DurableWaiters()
	for _, e := range s.kinds {
		e.requeue(waiters)
	}
	s.log.Info("lock service ready", "held_locks", held, "durable_waiters", len(waiters), "applied_index", s.fsm.AppliedIndex())
}

// gauges reads the state for a scrape of the metrics: not the FSM's Image
// (a scrape must not copy the state), nor the queues (their counts are read
// without their mutexes, held across proposals).
func (s *Service) gauges() metrics.Gauges {
	c := s.fsm.Counts()
	return metrics.Gauges{Locks: float64(c.Locks), Keys: float64(c.Keys), KVBytes: float64(c.KVBytes),
		LastToken: float64(c.LastToken), Epoch: float64(c.Epoch), Sessions: float64(s.fsm.SessionCount()),
		Waiters: float64(s.locks.queues.Queued()), Leases: float64(s.timers.Len())}
}

// awaitLeader returns nil once this node leads and the service is promoted
// in the node's current view of leadership, cluster.ErrNotLeader on a
// follower, or an error when ctx ends first.
func (s *Service) awaitLeader(ctx context.Context) error { return s.leader.Await(ctx) }

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
