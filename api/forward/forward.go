// Package forward is the edge's "try locally, on not-leader ask the
// leader": middleware that serves a request here when this node leads and
// otherwise proxies it to the leader, holding it while no leader is known
// and sending it again when the attempt certainly did nothing.
package forward

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"io"
	"maps"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"slices"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/fencer-io/fencer/api/wire"
	"github.com/fencer-io/fencer/internal/acl"
)

// endToEnd are the request headers that say who asks and what the request
// means. A client may name any header in Connection, and a proxy then drops
// it as hop-by-hop: the forwarder copies these back from the incoming
// request, so the leader sees exactly what this node saw. Without this, a
// request whose Authorization was dropped reached the leader carrying only
// this node's certificate.
var endToEnd = []string{"Authorization", "Content-Type", wire.HeaderToken, wire.HeaderLock, wire.HeaderLogFormat}

// DefaultLeaderWait is how long a request waits for a leader when none is
// known (SetLeaderWait): long enough for an election after a crash.
const DefaultLeaderWait = 3 * time.Second

// DefaultDeposedGrace is how long a request forwarded to a leader may still
// take once this node knows another leader (SetDeposedGrace). A leader that
// hands over answers what it holds within milliseconds (it forwards it on);
// one that stopped answering without closing its connections (a frozen
// process or host) never does, and without a bound every request sent to it
// waited for its client's own timeout, long after the next leader served.
const DefaultDeposedGrace = 500 * time.Millisecond

// maxReplay is the largest body kept to send a request a second time.
// Every request but a restore is far smaller.
const maxReplay = 64 << 10

// Leadership is what forwarding needs to know of this node.
type Leadership interface {
	ID() string
	IsLeader() bool
	Leader() (id, httpAddr string)
	// LeaderChanged returns a channel closed when Leader's answer may have
	// changed.
	LeaderChanged() <-chan struct{}
}

// ErrorWriter writes an error answer; the edge's sets Retry-After on a 503.
type ErrorWriter func(w http.ResponseWriter, status int, body *wire.Error)

// Forwarder proxies requests to the leader over kept-alive connections.
type Forwarder struct {
	c          Leadership
	writeError ErrorWriter
	scheme     string
	// Transport carries requests to the leader over kept-alive
	// connections (with the cluster's TLS once UseTLS is called).
	Transport *http.Transport
	// leaderWait bounds how long a request waits for a leader to be known
	// (in all, across its attempts).
	leaderWait time.Duration
	// deposedGrace bounds how long a forwarded request waits for the
	// leader it went to once another is known.
	deposedGrace time.Duration
}

// New returns a forwarder over plain http that waits DefaultLeaderWait for
// a leader.
func New(c Leadership, writeError ErrorWriter) *Forwarder {
	return &Forwarder{c: c, writeError: writeError, scheme: "http", leaderWait: DefaultLeaderWait, deposedGrace: DefaultDeposedGrace, Transport: &http.Transport{
		// A leader that is gone (a crashed host answers nothing) should
		// not hold a request long once another is elected.
		DialContext:         (&net.Dialer{Timeout: time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConnsPerHost: 256,
		IdleConnTimeout:     90 * time.Second,
	}}
}

// UseTLS makes the forwarder reach the leader over https with cfg.
func (f *Forwarder) UseTLS(cfg *tls.Config) {
	f.scheme = "https"
	f.Transport.TLSClientConfig = cfg
}

// SetLeaderWait bounds how long a request waits for a leader to be known;
// 0 answers 503 no_leader at once.
func (f *Forwarder) SetLeaderWait(d time.Duration) { f.leaderWait = d }

// SetDeposedGrace bounds how long a request forwarded to a leader may still
// take once this node knows another leader; it is then answered 503
// outcome_unknown (it reached the old leader, which may have applied it).
func (f *Forwarder) SetDeposedGrace(d time.Duration) { f.deposedGrace = d }

// IsStale reports whether the request asks for a read of this node's own
// state (?stale=true), which any node answers and nothing forwards.
func IsStale(r *http.Request) bool {
	return r.URL.RawQuery != "" && r.URL.Query().Get("stale") == "true"
}

// LeaderOnly serves the request here when this node leads (or is becoming
// the leader) and forwards it to the leader otherwise, so that a failover
// costs the caller time rather than an error:
//
//   - With no leader known (an election, a leader handing over), the
//     request waits for one, up to leaderWait.
//   - When the attempt certainly did nothing, the request goes again to
//     the next leader: the leader could not be reached, or answered that it
//     does not lead (wire.HeaderNotLeader), or this node, serving it, found
//     it had lost its leadership (cluster.ErrNotLeader).
//   - A request already forwarded once is never forwarded again; a node
//     that does not lead refuses it at once with HeaderNotLeader, and the
//     forwarding node sends it on when it learns of the new leader.
//
// Only requests with small bodies (all but a restore) are sent twice.
func (f *Forwarder) LeaderOnly(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if IsStale(r) && r.Method == http.MethodGet {
			next.ServeHTTP(w, r)
			return
		}
		by := r.Header.Get(wire.HeaderForwardedBy)
		body, replayable := bufferBody(r)
		deadline := &leaderDeadline{parent: r.Context(), at: time.Now().Add(f.leaderWait)}
		defer deadline.stop()
		pause := 25 * time.Millisecond
		route := saveRoute(r)
		for attempt := 0; ; attempt++ {
			changed := f.c.LeaderChanged()
			if attempt > 0 {
				// The last attempt did nothing. Wait for a change of
				// leader, or a pause in case the same one serves after all.
				if wait(deadline.context(), changed, pause) != nil {
					f.noLeader(w)
					return
				}
				changed = f.c.LeaderChanged()
				pause = min(2*pause, 400*time.Millisecond)
				r.Body = replay(body)
			}
			here, addr := f.route()
			for !here && addr == "" && by == "" {
				if wait(deadline.context(), changed, 50*time.Millisecond) != nil { // a member's address can arrive without a notice
					f.noLeader(w)
					return
				}
				changed = f.c.LeaderChanged()
				here, addr = f.route()
			}
			switch {
			case here && !replayable:
				next.ServeHTTP(w, r)
				return
			case here:
				if attempt > 0 {
					route.restore() // served here before: route it below again
				}
				if !serveHere(next, w, r) {
					return
				}
				if by != "" {
					f.notLeader(w, by)
					return
				}
			case by != "":
				f.notLeader(w, by)
				return
			case !forwardable(r):
				f.sendToLeader(w, addr)
				return
			case !f.proxy(w, r, addr, replayable):
				return
			}
		}
	})
}

// leaderDeadline bounds a request's wait for a leader from its arrival;
// its context is made only when the request has to wait, which one that
// reaches the leader never does.
type leaderDeadline struct {
	parent context.Context
	at     time.Time
	ctx    context.Context
	cancel context.CancelFunc
}

func (d *leaderDeadline) context() context.Context {
	if d.ctx == nil {
		d.ctx, d.cancel = context.WithDeadline(d.parent, d.at)
	}
	return d.ctx
}

func (d *leaderDeadline) stop() {
	if d.cancel != nil {
		d.cancel()
	}
}

// serveHere serves a request that may be sent again on this node, the
// leader, and reports whether the handler found that this node no longer
// leads having done nothing (the request may then go to the next leader).
func serveHere(next http.Handler, w http.ResponseWriter, r *http.Request) (rerouted bool) {
	rw := &rerouteWriter{ResponseWriter: w}
	if h := w.Header(); len(h) > 0 {
		rw.header = h.Clone()
	}
	next.ServeHTTP(rw, r)
	return rw.rerouted
}

// savedRoute is chi's routing state of a request as this middleware sees
// it, so that the routers below can route it a second time (they consume
// the path and stack parameters as they go).
type savedRoute struct {
	rctx  *chi.Context
	saved chi.Context
	// strs holds the parameters' keys and values and the route patterns,
	// copied in one allocation (the request path's only one here).
	strs []string
}

func saveRoute(r *http.Request) savedRoute {
	rctx := chi.RouteContext(r.Context())
	if rctx == nil {
		return savedRoute{}
	}
	return savedRoute{rctx: rctx, saved: *rctx, strs: slices.Concat(rctx.URLParams.Keys, rctx.URLParams.Values, rctx.RoutePatterns)}
}

// restore puts the saved state back, with slices of its own, so that the
// saved copy survives routing again.
func (s savedRoute) restore() {
	if s.rctx == nil {
		return
	}
	k, v := len(s.saved.URLParams.Keys), len(s.saved.URLParams.Values)
	*s.rctx = s.saved
	s.rctx.URLParams.Keys = slices.Clone(s.strs[:k])
	s.rctx.URLParams.Values = slices.Clone(s.strs[k : k+v])
	s.rctx.RoutePatterns = slices.Clone(s.strs[k+v:])
}

// route says where a request goes now: here, when this node leads or is
// becoming the leader (its handlers wait until it is ready), else to the
// leader's address, "" when none is known.
func (f *Forwarder) route() (here bool, addr string) {
	if f.c.IsLeader() {
		return true, ""
	}
	id, addr := f.c.Leader()
	if id == f.c.ID() {
		return true, ""
	}
	if id == "" {
		return false, ""
	}
	return false, addr
}

func wait(ctx context.Context, changed <-chan struct{}, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-changed:
	case <-t.C:
	}
	return nil
}

func (f *Forwarder) noLeader(w http.ResponseWriter) {
	f.writeError(w, http.StatusServiceUnavailable, &wire.Error{Code: wire.CodeNoLeader, Message: "no leader is known to " + f.c.ID() + "; retry"})
}

// notLeader refuses a request another node forwarded here, saying that it
// did nothing, so that the forwarding node sends it to the next leader.
func (f *Forwarder) notLeader(w http.ResponseWriter, by string) {
	w.Header().Set(wire.HeaderNotLeader, f.c.ID())
	f.writeError(w, http.StatusServiceUnavailable, &wire.Error{Code: wire.CodeNoLeader,
		Message: f.c.ID() + " does not lead; " + by + " forwarded the request here and may send it to the leader"})
}

// forwardable reports whether the leader could check the request's
// credential again: not a member's certificate or signature, which prove
// who sent it only to this node (acl.Principal.Forwardable).
func forwardable(r *http.Request) bool {
	p, ok := acl.PrincipalFrom(r.Context())
	return !ok || p.Forwardable()
}

// sendToLeader refuses a member's request that only the leader itself can
// authenticate, naming the leader (wire.HeaderLeader) so that the member
// sends it there: it did nothing here.
func (f *Forwarder) sendToLeader(w http.ResponseWriter, addr string) {
	w.Header().Set(wire.HeaderLeader, addr)
	f.writeError(w, http.StatusServiceUnavailable, &wire.Error{Code: wire.CodeNoLeader,
		Message: f.c.ID() + " does not lead, and a member's own credential is checked by the node it was sent to: send the request to the leader at " + addr})
}

// errNotLeader: the node a request was forwarded to does not lead.
var errNotLeader = errors.New("the node forwarded to does not lead")

// errDeposed: another leader took over while a request forwarded to the old
// one waited for its answer, and the old one did not answer in time.
var errDeposed = errors.New("another leader took over and the old one did not answer")

// cutWhenDeposed cancels a request forwarded to the leader at addr (cancel)
// once this node has known another leader for deposedGrace, and returns a
// function that stops watching. It watches only while the request runs.
func (f *Forwarder) cutWhenDeposed(addr string, cancel context.CancelCauseFunc) (stop func()) {
	done := make(chan struct{})
	go func() {
		var grace <-chan time.Time
		for {
			changed := f.c.LeaderChanged()
			if here, now := f.route(); grace == nil && (here || now != "" && now != addr) {
				t := time.NewTimer(f.deposedGrace)
				defer t.Stop()
				grace = t.C
			}
			select {
			case <-done:
				return
			case <-changed:
			case <-grace:
				cancel(errDeposed)
				return
			}
		}
	}()
	return func() { close(done) }
}

// proxy forwards r to the leader at addr. It reports true, having written
// nothing, when the request did nothing and may go to the next leader: the
// leader could not be dialled, or refused it as not the leader.
func (f *Forwarder) proxy(w http.ResponseWriter, r *http.Request, addr string, replayable bool) (again bool) {
	target := &url.URL{Scheme: f.scheme, Host: addr}
	ctx, cancel := context.WithCancelCause(r.Context())
	defer cancel(nil)
	if f.deposedGrace > 0 {
		defer f.cutWhenDeposed(addr, cancel)()
	}
	r = r.WithContext(ctx)
	rp := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(target)
			pr.Out.Host = addr
			for _, h := range endToEnd {
				h = http.CanonicalHeaderKey(h)
				if v, ok := pr.In.Header[h]; ok {
					pr.Out.Header[h] = v
				}
			}
			pr.Out.Header.Set(wire.HeaderForwardedBy, f.c.ID())
			pr.Out.Header.Del(wire.HeaderForwardedPrincipal)
			if p, ok := acl.PrincipalFrom(pr.In.Context()); ok {
				pr.Out.Header.Set(wire.HeaderForwardedPrincipal, p.Name)
			}
		},
		Transport: f.Transport,
		ModifyResponse: func(resp *http.Response) error {
			if resp.StatusCode == http.StatusServiceUnavailable && resp.Header.Get(wire.HeaderNotLeader) != "" {
				return errNotLeader
			}
			// Tell the client where the leader is, so that it can go there
			// directly next time.
			resp.Header.Set(wire.HeaderLeader, addr)
			return nil
		},
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			// A request that never reached the leader certainly did nothing;
			// one that failed afterwards may have been applied.
			var op *net.OpError
			dial := errors.As(err, &op) && op.Op == "dial"
			read := r.Method == http.MethodGet || r.Method == http.MethodHead
			deposed := errors.Is(context.Cause(ctx), errDeposed)
			switch {
			case replayable && (dial || errors.Is(err, errNotLeader) || read && deposed):
				// A read changes nothing: one the old leader never answered
				// goes to the new leader like one that never reached it.
				again = true
			case deposed && !read:
				f.writeError(w, http.StatusServiceUnavailable, &wire.Error{Code: wire.CodeOutcomeUnknown, Message: "leader " + addr +
					" did not answer, and another leader has taken over; the request may have been applied there before"})
			case r.Method == http.MethodGet || dial || errors.Is(err, errNotLeader):
				f.writeError(w, http.StatusServiceUnavailable, &wire.Error{Code: wire.CodeNoLeader, Message: "leader " + addr + " unreachable: " + err.Error()})
			default:
				f.writeError(w, http.StatusServiceUnavailable, &wire.Error{Code: wire.CodeOutcomeUnknown, Message: "connection to leader " + addr + " failed mid-request; the request may have been applied: " + err.Error()})
			}
		},
	}
	rp.ServeHTTP(w, r)
	return again
}

// bufferBody reads a small body into memory, so that the request can be
// sent again (replay gives a fresh reader of it each time), and leaves r
// reading it from the start. It reports false (leaving the body as it was)
// for a large one.
func bufferBody(r *http.Request) (body []byte, ok bool) {
	if r.Body == nil || r.Body == http.NoBody {
		return nil, true
	}
	if r.ContentLength > maxReplay {
		return nil, false
	}
	var b []byte
	var err error
	if r.ContentLength > 0 {
		// The usual case: the size is known, so read it into one buffer
		// of that size, and make sure nothing follows.
		b = make([]byte, r.ContentLength)
		var n int
		n, err = io.ReadFull(r.Body, b)
		b = b[:n]
		if err == nil {
			var one [1]byte
			if n, _ := r.Body.Read(one[:]); n > 0 {
				b, err = append(b, one[0]), errLongerThanSaid
			}
		}
	} else {
		b, err = io.ReadAll(io.LimitReader(r.Body, maxReplay+1))
	}
	if err != nil || len(b) > maxReplay {
		r.Body = struct {
			io.Reader
			io.Closer
		}{io.MultiReader(bytes.NewReader(b), r.Body), r.Body}
		return nil, false
	}
	r.Body = replay(b)
	return b, true
}

// errLongerThanSaid: a body went on past its Content-Length (net/http's
// server never lets one; other callers might).
var errLongerThanSaid = errors.New("body longer than its Content-Length")

// replay returns a fresh reader of a body bufferBody kept (nil: none).
func replay(b []byte) io.ReadCloser {
	if b == nil {
		return http.NoBody
	}
	rb := &replayBody{}
	rb.Reset(b)
	return rb
}

type replayBody struct{ bytes.Reader }

func (*replayBody) Close() error { return nil }

// Reroute takes a request served here back to the forwarder, to go to the
// leader, when its handler found that this node does not lead having done
// nothing (cluster.ErrNotLeader): it reports true, and the handler writes
// nothing, when w may still reroute (the forwarder serves the request, and
// nothing was written yet).
func Reroute(w http.ResponseWriter) bool {
	rw, ok := w.(*rerouteWriter)
	return ok && rw.reroute()
}

// rerouteWriter is the response writer of a request served here that may
// still go to another leader (see Reroute).
type rerouteWriter struct {
	http.ResponseWriter
	header   http.Header // the headers before the handler ran
	wrote    bool
	rerouted bool
}

func (rw *rerouteWriter) WriteHeader(code int) {
	rw.wrote = true
	rw.ResponseWriter.WriteHeader(code)
}

func (rw *rerouteWriter) Write(b []byte) (int, error) {
	rw.wrote = true
	return rw.ResponseWriter.Write(b)
}

func (rw *rerouteWriter) Flush() {
	if fl, ok := rw.ResponseWriter.(http.Flusher); ok {
		rw.wrote = true
		fl.Flush()
	}
}

func (rw *rerouteWriter) Unwrap() http.ResponseWriter { return rw.ResponseWriter }

// reroute takes the request back if nothing was written, undoing the
// handler's headers.
func (rw *rerouteWriter) reroute() bool {
	if rw.wrote {
		return false
	}
	rw.rerouted = true
	h := rw.ResponseWriter.Header()
	clear(h)
	maps.Copy(h, rw.header) // nil when there were none
	return true
}
