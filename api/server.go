// Package api is fencer's HTTP edge: chi routes, handlers, forwarding to the
// leader (api/forward), reading requests (api/internal/request), the event
// stream (api/internal/sse), and the one table that maps errors to
// statuses. Handlers reach the coordination layer through the Coord
// interface and the Raft node through the Cluster interface (coord.Service
// and cluster.Node satisfy them; tests fake both).
//
// Any node serves any request. Writes and linearizable reads are served by
// the leader: a follower forwards them, and while no leader is known (an
// election, a leader handing over) it holds them until one is, so that a
// failover costs callers time rather than errors (api/forward). A forwarded
// request is never forwarded again. Reads with ?stale=true are answered
// from the local state machine.
package api

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"iter"
	"log/slog"
	"net/http"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/go-chi/chi/v5/middleware"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/fencer-io/fencer/api/forward"
	"github.com/fencer-io/fencer/api/wire"
	"github.com/fencer-io/fencer/cluster"
	"github.com/fencer-io/fencer/coord"
	"github.com/fencer-io/fencer/coord/events"
	"github.com/fencer-io/fencer/fsm"
	"github.com/fencer-io/fencer/fsm/entry"
	"github.com/fencer-io/fencer/fsm/snapshot"
	"github.com/fencer-io/fencer/internal/limits"
	"github.com/fencer-io/fencer/internal/ui"
)

// Cluster is what the HTTP layer needs of the Raft node: who leads,
// membership, status, backup and restore.
type Cluster interface {
	ID() string
	IsLeader() bool
	Leader() (id, httpAddr string)
	// LeaderChanged returns a channel closed when Leader's answer may have
	// changed.
	LeaderChanged() <-chan struct{}

	Join(ctx context.Context, req wire.JoinRequest) error
	RemoveMember(ctx context.Context, id string) error
	TransferLeadership(ctx context.Context, id string) error
	Status() (wire.ClusterStatus, error)
	// MemberStatuses asks every member for its own view.
	MemberStatuses(ctx context.Context) (wire.MemberStatusList, error)
	Backup(ctx context.Context, w io.Writer) (snapshot.Header, error)
	Restore(ctx context.Context, r io.Reader, opts cluster.RestoreOptions) (snapshot.Header, error)
	Digest() (appliedIndex uint64, digest string)
	Registry() *prometheus.Registry
}

// Coord is what the HTTP layer needs of the coordination layer: locks and
// fenced keys.
type Coord interface {
	Acquire(ctx context.Context, req coord.AcquireRequest) (fsm.AcquireResult, error)
	Renew(ctx context.Context, name string, token uint64, secret string) (entry.Lock, error)
	Release(ctx context.Context, name string, token uint64, secret string) error
	Lock(ctx context.Context, name string, stale bool) (coord.LockStatus, error)
	Locks(ctx context.Context, stale bool) (iter.Seq[coord.LockStatus], uint64, error)
	Check(ctx context.Context, name string, token uint64, stale bool) (coord.CheckResult, error)
	Put(ctx context.Context, req coord.PutRequest) (uint64, error)
	DeleteKey(ctx context.Context, key string) (fsm.DeleteKeyResult, error)
	Get(ctx context.Context, key string, stale bool) (entry.FencedKey, bool, uint64, error)
	Watch(since int64) (*events.Watcher, error)
	// The grant history and blocking reads (history.go): linearizable
	// unless stale.
	History(ctx context.Context, lock string, n int, stale bool) ([]entry.GrantRecord, uint64, error)
	SemaphoreHistory(ctx context.Context, sem string, n int, stale bool) ([]entry.GrantRecord, uint64, error)
	Grant(ctx context.Context, token uint64, stale bool) (entry.GrantRecord, uint64, error)
	// Ready returns the log format the members read once this node can
	// serve every command of it, or why not.
	Ready() (format int, err error)
	// WaitLock returns early, as if the lock changed, when until is closed.
	WaitLock(ctx context.Context, lock string, index uint64, wait time.Duration, until <-chan struct{}) (bool, error)
	AppliedIndex() uint64

	Proclaim(ctx context.Context, name string, token uint64, secret, value string) (entry.Lock, error)
	AcquirePermit(ctx context.Context, req coord.PermitRequest) (fsm.PermitResult, error)
	RenewPermit(ctx context.Context, name string, token uint64, secret string) (entry.Permit, error)
	ReleasePermit(ctx context.Context, name string, token uint64, secret string) error
	Semaphore(ctx context.Context, name string, stale bool) (coord.SemaphoreStatus, error)
	Semaphores(ctx context.Context, stale bool) ([]coord.SemaphoreStatus, error)
	CheckPermit(ctx context.Context, name string, token uint64, stale bool) (bool, error)

	// Multi-locks (multilocks.go): MultiGrant reads the leader's state.
	MultiAcquire(ctx context.Context, req coord.MultiAcquireRequest) (fsm.MultiResult, error)
	RenewMulti(ctx context.Context, token uint64, secret string) (fsm.MultiGrant, error)
	ReleaseMulti(ctx context.Context, token uint64, secret string) (fsm.MultiGrant, error)
	MultiGrant(token uint64) (fsm.MultiGrant, bool)

	// Sessions (sessions.go).
	CreateSession(ctx context.Context, req coord.SessionRequest) (fsm.SessionResult, error)
	RenewSession(ctx context.Context, id uint64, secret string) (entry.Session, error)
	CloseSession(ctx context.Context, id uint64, secret string) ([]fsm.SessionGrant, error)
	Session(ctx context.Context, id uint64, stale bool) (coord.SessionStatus, error)
	Sessions(ctx context.Context, stale bool) ([]coord.SessionStatus, error)

	// Revoke (revoke.go): operators only.
	Revoke(ctx context.Context, name string, token uint64) (fsm.ReleaseResult, error)
	RevokePermit(ctx context.Context, name string, token uint64) (fsm.SemReleaseResult, error)
	RevokeSession(ctx context.Context, id uint64) (entry.Session, []fsm.SessionGrant, error)
}

// Server is the HTTP API of one node.
type Server struct {
	c     Cluster
	co    Coord
	log   *slog.Logger
	fwd   *forward.Forwarder
	met   *requestMetrics
	pprof bool
	// scratch is where a snapshot download is buffered ("": the system's
	// temporary directory).
	scratch string
	guard   *browserGuard // nil: no Host or origin checks (an ACL is on)
	// RequestTimeout bounds each request's work (not its wait_ms queueing).
	requestTimeout time.Duration
	// keepAlive is how often an idle event stream gets a comment line.
	keepAlive time.Duration
	// watch bounds event streams and blocking reads; streams and blocking
	// count those open.
	watch             WatchLimits
	streams, blocking *limits.Held
	// membersView limits each client's GET /v1/cluster/members, which
	// asks every member.
	membersView *limits.Buckets
}

// WatchLimits bound what a node holds open for its readers. Zero values
// mean the defaults; a negative limit is none.
type WatchLimits struct {
	// Streams and StreamsPerClient limit open event streams, in all and
	// per client (the ACL principal, or the remote IP).
	Streams, StreamsPerClient int
	// BlockingReads and BlockingReadsPerClient limit blocking reads in
	// progress.
	BlockingReads, BlockingReadsPerClient int
	// WriteTimeout bounds each write to an event stream: a reader that
	// takes longer to accept one is disconnected.
	WriteTimeout time.Duration
}

// DefaultStreamWriteTimeout is WatchLimits.WriteTimeout's default: a
// healthy reader takes a write in milliseconds, and one silent this long
// (through a keep-alive, every 15 s) is gone or not reading.
const DefaultStreamWriteTimeout = 10 * time.Second

func (l *WatchLimits) fill() {
	def := func(v *int, d int) {
		if *v == 0 {
			*v = d
		}
	}
	def(&l.Streams, limits.DefaultMaxStreams)
	def(&l.StreamsPerClient, limits.DefaultMaxStreamsPerClient)
	def(&l.BlockingReads, limits.DefaultMaxBlockingReads)
	def(&l.BlockingReadsPerClient, limits.DefaultMaxBlockingReadsPerClient)
	if l.WriteTimeout <= 0 {
		l.WriteTimeout = DefaultStreamWriteTimeout
	}
}

// WithWatchLimits bounds event streams and blocking reads (see WatchLimits).
func WithWatchLimits(l WatchLimits) Option { return func(s *Server) { s.watch = l } }

// Option configures a Server.
type Option func(*Server)

// WithPeerTLS makes the server forward to the leader over https with this
// client configuration (the node's certificate, the cluster CA).
func WithPeerTLS(cfg *tls.Config) Option {
	return func(s *Server) {
		s.fwd.UseTLS(cfg)
	}
}

// WithLeaderWait bounds how long a request waits for a leader to be known
// (default forward.DefaultLeaderWait); 0 answers 503 no_leader at once.
func WithLeaderWait(d time.Duration) Option { return func(s *Server) { s.fwd.SetLeaderWait(d) } }

// WithProfiling serves net/http/pprof under /debug/pprof/ (operator-only
// when an ACL is on).
func WithProfiling() Option { return func(s *Server) { s.pprof = true } }

// WithScratchDir buffers snapshot downloads in dir (a node's data
// directory: a snapshot holds every lease secret, and the system's
// temporary directory may be shared, or in memory).
func WithScratchDir(dir string) Option { return func(s *Server) { s.scratch = dir } }

// NewServer returns the API of a node (c) and its coordination layer (co).
// A nil logger discards.
func NewServer(c Cluster, co Coord, logger *slog.Logger, opts ...Option) *Server {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	s := &Server{c: c, co: co, log: logger, fwd: forward.New(c, writeError), met: newRequestMetrics(c.Registry()), requestTimeout: 10 * time.Second, keepAlive: 15 * time.Second,
		membersView: limits.NewBuckets(MembersViewRate, MembersViewBurst)}
	for _, o := range opts {
		o(s)
	}
	s.watch.fill()
	s.streams = limits.NewHeld("event streams", s.watch.Streams, s.watch.StreamsPerClient)
	s.blocking = limits.NewHeld("blocking reads", s.watch.BlockingReads, s.watch.BlockingReadsPerClient)
	s.met.held(c.Registry(), s.streams, s.blocking)
	return s
}

// Handler returns the routes.
func (s *Server) Handler() http.Handler {
	r := chi.NewRouter()
	r.Use(s.met.middleware)
	if s.guard != nil {
		r.Use(s.guard.middleware)
	}
	r.Method(http.MethodGet, "/metrics", s.met.handler)
	if s.pprof {
		r.Mount("/debug", middleware.Profiler())
	}
	// Probes answer HEAD as well: load balancers and monitors use it.
	for _, m := range []string{http.MethodGet, http.MethodHead} {
		r.MethodFunc(m, "/healthz", s.healthz)
		r.MethodFunc(m, "/readyz", s.readyz)
	}
	r.Route("/v1", func(r chi.Router) {
		r.Mount("/locks", s.lockRoutes())
		r.Mount("/semaphores", s.semaphoreRoutes())
		r.Mount("/sessions", s.sessionRoutes())
		r.Mount("/kv", s.kvRoutes())
		r.Mount("/cluster", s.clusterRoutes())
		r.Get("/events", s.events)
		r.Get("/whoami", s.whoami)
		r.With(s.fwd.LeaderOnly).Get("/tokens/{token}", s.token)
		r.Get("/debug/state", s.debugState)
		r.Get("/openapi.yaml", s.openapi)
	})
	// The dashboard: static files, not part of the API's contract.
	r.Handle("/ui", ui.Handler("/ui"))
	r.Mount("/ui/", ui.Handler("/ui"))
	r.NotFound(func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, &wire.Error{Code: wire.CodeNotFound, Message: "no route for " + r.Method + " " + r.URL.Path})
	})
	r.MethodNotAllowed(func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusMethodNotAllowed, &wire.Error{Code: wire.CodeMethodNotAllowed, Message: r.Method + " is not allowed on " + r.URL.Path})
	})
	return r
}

func (s *Server) healthz(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, wire.Health{Node: s.c.ID(), Status: "ok"})
}

// readyz answers 200 once this node can serve every command its members
// read: a leader is known, the node is caught up, every member's format is
// recorded and the cluster's grant-history settings are applied (coord's
// Ready). During a real mixed-version upgrade it is ready for what the
// oldest member reads, and the body says so.
func (s *Server) readyz(w http.ResponseWriter, r *http.Request) {
	format, err := s.co.Ready()
	if err != nil {
		writeError(w, http.StatusServiceUnavailable, &wire.Error{Code: wire.CodeNoLeader, Message: "not ready: " + err.Error()})
		return
	}
	h := wire.Health{Node: s.c.ID(), Status: "ready", LogFormat: format}
	if format < entry.LogFormat {
		h.Note = fmt.Sprintf("the members read log format %d, this build %d: commands that need a newer format are refused (409 upgrade_required) until every member runs this build", format, entry.LogFormat)
	}
	writeJSON(w, http.StatusOK, h)
}

func (s *Server) debugState(w http.ResponseWriter, r *http.Request) {
	idx, digest := s.c.Digest()
	writeJSON(w, http.StatusOK, wire.StateDigest{Node: s.c.ID(), AppliedIndex: idx, Digest: digest})
}
