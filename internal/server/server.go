// Package server assembles one fencer node: the state machine, the Raft node
// (cluster), the coordination layer over it (coord) and the HTTP API on a
// listener. It is what `fencer serve` and `fencer dev` run, and what
// in-process tests start, so that every one of them runs the same node.
package server

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/fencer-io/fencer/api/wire"
	"log/slog"
	"net"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/fencer-io/fencer/api"
	"github.com/fencer-io/fencer/cluster"
	"github.com/fencer-io/fencer/coord"
	"github.com/fencer-io/fencer/coord/events"
	"github.com/fencer-io/fencer/fsm"
	"github.com/fencer-io/fencer/fsm/entry"
	"github.com/fencer-io/fencer/internal/acl"
	"github.com/fencer-io/fencer/internal/limits"
)

var (
	_ api.Cluster = (*cluster.Node)(nil)
	_ api.Coord   = (*coord.Service)(nil)
	_ coord.Raft  = (*cluster.Node)(nil)
)

// Instance is a running node with its coordination layer and HTTP server.
type Instance struct {
	Node  *cluster.Node
	Coord *coord.Service
	HTTP  *http.Server
	ln    net.Listener
	done  chan error
	log   *slog.Logger
}

// Options secure and limit the HTTP side. Zero values: plaintext, no ACL,
// default rate limit and server limits.
type Options struct {
	// TLS serves the API over https (tlsutil.ServerConfig).
	TLS *tls.Config
	// ACL, when set, requires a bearer token on every request but the
	// probes, and audits operator actions.
	ACL *acl.Store
	// RateLimit is requests per second per client; 0 or less is off
	// (fencer serve sets its own default).
	RateLimit int
	// Limits are the server's timeouts and size caps.
	Limits limits.ServerConfig
	// Profiling serves /debug/pprof/.
	Profiling bool
	// Coord sets the lock limits (its clock, logger and registry are the
	// node's).
	Coord coord.Config
	// AllowedHosts are host names, besides localhost and the names in the
	// cluster's own addresses, that requests may name in Host when there is
	// no ACL (api.WithBrowserGuard).
	AllowedHosts []string
	// Events sizes the node's event history (GET /v1/events).
	Events events.Config
	// Watch limits event streams and blocking reads.
	Watch api.WatchLimits
}

// Start listens on httpAddr (port 0 picks one; the real address is then the
// advertised one), opens the node and serves its API.
//
// It is long because it assembles a node in order (listener, state machine,
// Raft node, coordination layer, HTTP server), closing what it opened on any
// failure.
func Start(cfg cluster.Config, httpAddr string, options ...Options) (*Instance, error) {
	var opts Options
	if len(options) > 0 {
		opts = options[0]
	}
	if err := opts.Limits.Validate(); err != nil {
		return nil, err
	}
	rate := limits.RateConfig{Requests: opts.RateLimit, Exempt: limits.ForwardedByNode}
	if opts.RateLimit <= 0 {
		rate.Requests = -1 // off
	}
	if err := rate.Validate(); err != nil {
		return nil, err
	}
	limit, err := limits.RateLimit(rate)
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", httpAddr)
	if err != nil {
		return nil, fmt.Errorf("http listen on %s: %w", httpAddr, err)
	}
	if cfg.HTTPAddr == "" {
		cfg.HTTPAddr = ln.Addr().String()
	}
	if opts.TLS != nil {
		ln = tls.NewListener(ln, opts.TLS)
	}
	// The port is served from now on: while the node opens (and, with an
	// --initial-cluster, probes the others) every request is answered 503
	// at once. Members starting together probe each other, and a port
	// bound but not yet served held each probe for its whole timeout:
	// about two seconds before a new cluster could even bootstrap.
	swap := &startingHandler{id: cfg.ID}
	srv := &http.Server{Handler: swap, TLSConfig: opts.TLS, Protocols: serverProtocols()}
	opts.Limits.Apply(srv)
	done := make(chan error, 1)
	go func() {
		err := srv.Serve(ln)
		if errors.Is(err, http.ErrServerClosed) {
			err = nil
		}
		done <- err
	}()
	logger := cfg.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	state := fsm.New(logger.With("node", cfg.ID))
	// The history observes the FSM before Raft replays anything into it.
	events := events.New(opts.Events)
	state.Observe(events)
	if opts.ACL != nil {
		// Members sign what they ask of this node for its advertised
		// address, with the keys the replicated state records.
		opts.ACL.UseMembers(memberKeys{state}, cfg.HTTPAddr)
	}
	node, err := cluster.Open(cfg, state)
	if err != nil {
		srv.Close()
		<-done
		return nil, err
	}
	ccfg := opts.Coord
	ccfg.Logger, ccfg.Registry, ccfg.Events = logger.With("node", cfg.ID), node.Registry(), events
	if ccfg.GrantHistory == nil {
		ccfg.GrantHistory = &entry.GrantHistorySettings{PerLock: entry.DefaultGrantHistoryPerLock, Global: entry.DefaultGrantHistory}
	}
	svc := coord.New(node, state, ccfg)
	swap.serve(handler(node, svc, cfg, opts, logger, limit))
	return &Instance{Node: node, Coord: svc, HTTP: srv, ln: ln, done: done, log: logger.With("node", cfg.ID)}, nil
}

// startingHandler answers 503 while the node starts, then serves the API.
type startingHandler struct {
	id  string
	api atomic.Pointer[http.Handler]
}

func (s *startingHandler) serve(h http.Handler) { s.api.Store(&h) }

func (s *startingHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if h := s.api.Load(); h != nil {
		(*h).ServeHTTP(w, r)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Retry-After", "1")
	w.WriteHeader(http.StatusServiceUnavailable)
	json.NewEncoder(w).Encode(wire.Error{Code: wire.CodeNoLeader, Message: s.id + " is starting: it opens its data dir and finds its cluster; retry"})
}

// handler is the node's API behind its middleware, outermost first:
// authenticate, then rate-limit per principal, then cap the body.
func handler(node *cluster.Node, svc *coord.Service, cfg cluster.Config, opts Options, logger *slog.Logger, limit func(http.Handler) http.Handler) http.Handler {
	var apiOpts []api.Option
	if opts.Profiling {
		apiOpts = append(apiOpts, api.WithProfiling())
	}
	if cfg.PeerTLSClient != nil {
		apiOpts = append(apiOpts, api.WithPeerTLS(cfg.PeerTLSClient))
	}
	if opts.ACL == nil {
		apiOpts = append(apiOpts, api.WithBrowserGuard(ownHosts(cfg, opts.AllowedHosts)))
	}
	// A request that finds no leader waits long enough for an election
	// after a crash: a follower notices within one to three heartbeat
	// timeouts, and a failed round costs up to two election timeouts.
	apiOpts = append(apiOpts, api.WithLeaderWait(node.FailoverBound()), api.WithWatchLimits(opts.Watch), api.WithScratchDir(cfg.DataDir))
	h := api.NewServer(node, svc, logger.With("node", cfg.ID), apiOpts...).Handler()
	h = limits.MaxBody(opts.Limits.MaxBodyBytes, api.RestorePath)(h)
	h = limit(h)
	if opts.ACL != nil {
		h = acl.Middleware(opts.ACL, acl.WithNodeCerts(), acl.WithAudit(logger.With("log", "audit", "node", cfg.ID)))(h)
	}
	return h
}

// ownHosts lists the addresses the cluster itself uses to reach nodes (this
// node's, --join's, --initial-cluster's) and the allowed host names: a node
// without an ACL answers requests that name any of them.
func ownHosts(cfg cluster.Config, allowed []string) []string {
	hosts := append([]string{cfg.HTTPAddr}, allowed...)
	hosts = append(hosts, cfg.Join...)
	for _, p := range cfg.InitialCluster {
		hosts = append(hosts, p.HTTPAddr)
	}
	return hosts
}

// memberKeys is the FSM as the ACL's directory of member keys.
type memberKeys struct{ state *fsm.FSM }

func (m memberKeys) MemberKey(id string) string {
	rec, _ := m.state.Member(id)
	return rec.Key
}

// Addr returns the HTTP address the instance serves on.
func (in *Instance) Addr() string { return in.ln.Addr().String() }

// Done delivers the HTTP server's exit error.
func (in *Instance) Done() <-chan error { return in.done }

// Stop stops the node gracefully, for a restart or an upgrade: a leader
// first hands its leadership to the most up-to-date voter and waits until
// it knows the new leader (cluster.Node.Handover), its API holding new
// requests meanwhile and then forwarding them, so that clients see no
// election; then it closes as Close does. A handover that fails is logged,
// and the node stops anyway.
func (in *Instance) Stop() error {
	handed, err := in.Node.Handover()
	if err != nil {
		in.log.Warn("stopping without handing leadership over", "err", err)
	}
	if handed {
		// Keep answering for a moment: members and clients that still
		// send here, having not yet heard of the new leader, get their
		// requests forwarded (and the leader named) rather than a
		// connection closed under a request in flight.
		time.Sleep(drainAfterHandover)
	}
	return in.Close()
}

// drainAfterHandover is how long a node that handed its leadership over
// keeps serving before it closes: a few round trips, for whoever still
// sends to it.
const drainAfterHandover = 200 * time.Millisecond

// Close stops serving HTTP (letting requests in flight finish for a moment),
// then shuts the node down and, once Raft is stopped (the node lets every
// proposal in flight be answered first, and refuses new ones), the
// coordination layer. A leader stops as if it
// crashed: Stop hands leadership over first.
func (in *Instance) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	in.HTTP.Shutdown(ctx)
	// Shutdown waits for requests to finish, and an event stream never
	// does: close what is left, so that watchers reconnect elsewhere.
	in.HTTP.Close()
	err := in.Node.Close()
	in.Coord.Close()
	return err
}

// serverProtocols is what a node's HTTP port speaks: HTTP/1.1, and HTTP/2
// both over TLS (negotiated) and over plain TCP with prior knowledge (h2c:
// a client that starts with HTTP/2's preface). Every client keeps working
// as it did; one that speaks h2c multiplexes its requests over one
// connection (docs/benchmarks.md, "HTTP/2").
func serverProtocols() *http.Protocols {
	var p http.Protocols
	p.SetHTTP1(true)
	p.SetHTTP2(true)
	p.SetUnencryptedHTTP2(true)
	return &p
}
