package client

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/fencer-io/fencer/api/client/internal/transport"
	"github.com/fencer-io/fencer/api/wire"
)

// SessionOption tunes NewSession.
type SessionOption func(*sessionOptions)

type sessionOptions struct {
	ttl       time.Duration
	holder    string
	lockDelay time.Duration
	requestID string
}

// SessionTTL sets the session's time to live (default wire.DefaultTTL,
// 10s), bounded as a lock's TTL: truncated to whole milliseconds, within
// wire.MinTTL..MaxTTL. Every grant under the session lives by it.
func SessionTTL(d time.Duration) SessionOption { return func(o *sessionOptions) { o.ttl = d } }

// SessionHolder names the session's holder (default "hostname-pid"), which
// is also the default holder of every grant under it.
func SessionHolder(h string) SessionOption { return func(o *sessionOptions) { o.holder = h } }

// SessionLockDelay is the lock-delay (at most wire.MaxLockDelay) of every
// grant under the session that asks for none of its own, started when the
// session expires (not when it is closed).
func SessionLockDelay(d time.Duration) SessionOption {
	return func(o *sessionOptions) { o.lockDelay = d }
}

// SessionRequestID sends id (at most wire.MaxRequestID characters) as the
// request id instead of a random one, so that a caller who lost the answer
// of an earlier NewSession (a process restarted, say) gets that session
// back (Info().Existing) rather than a second one, while the server still
// remembers the id.
func SessionRequestID(id string) SessionOption { return func(o *sessionOptions) { o.requestID = id } }

func newSessionOptions(opts []SessionOption) (sessionOptions, error) {
	o := sessionOptions{ttl: wire.DefaultTTL}
	for _, opt := range opts {
		opt(&o)
	}
	if o.holder == "" {
		o.holder = DefaultHolder()
	}
	o.ttl = o.ttl.Truncate(time.Millisecond)
	switch {
	case o.ttl < wire.MinTTL || o.ttl > wire.MaxTTL:
		return o, refuse(wire.CodeInvalidTTL, "session ttl %v: want %v to %v", o.ttl, wire.MinTTL, wire.MaxTTL)
	case o.lockDelay < 0 || o.lockDelay > wire.MaxLockDelay:
		return o, refuse(wire.CodeInvalidLockDelay, "session lock-delay %v: want 0 to %v", o.lockDelay, wire.MaxLockDelay)
	}
	return o, nil
}

// Session is one lease for many grants: locks, semaphore permits and
// elections acquired through it (Lock, AcquirePermit, Campaign) live as
// long as the session, which one renewal per TTL/3 keeps alive whatever it
// holds. Its context is cancelled, and Done closed, as soon as the client
// can no longer be sure the server has not expired it (the local deadline
// of a Lease: the send time of the last confirmed renewal plus TTL minus
// Margin); the Done of every grant under it closes with it.
type Session struct {
	c    *Client
	info wire.Session
	ttl  time.Duration
	k    *keeper

	closeMu sync.Mutex
	closed  bool
}

// NewSession creates a session (POST /v1/sessions) and keeps it alive in
// the background until Close or loss. ctx bounds only the creation.
//
// Every attempt carries the same request id (random, or SessionRequestID's),
// so a retry after a lost answer returns the first session instead of
// creating a second.
func (c *Client) NewSession(ctx context.Context, opts ...SessionOption) (*Session, error) {
	o, err := newSessionOptions(opts)
	if err != nil {
		return nil, err
	}
	body := wire.SessionRequest{
		Holder:          o.holder,
		TTLMillis:       o.ttl.Milliseconds(),
		LockDelayMillis: o.lockDelay.Milliseconds(),
		RequestID:       o.requestID,
	}
	if body.RequestID == "" {
		body.RequestID = newRequestID()
	}
	r := &transport.Request{Path: "/v1/sessions"}
	var out wire.Session
	if err := c.tr.PostJSON(ctx, r, body, &out); err != nil {
		return nil, err
	}
	if err := checkSession(out, body); err != nil {
		return nil, err
	}
	// As for a grant (Client.hold): the server starts the session when it
	// applies the creating entry, after the attempt that answered was
	// sent, or for a retry answered with the earlier session, the first.
	start := r.Sent
	if out.Existing {
		start = r.FirstSent
	}
	s := newSession(c, out, start)
	received := time.Now()
	// A request id of the caller's own may name a session that an earlier
	// call created at any time before this one: only a renewal says how
	// long it has left. Otherwise, as for a grant, renew once when slow
	// retries left start stale.
	if (out.Existing && o.requestID != "") || received.Sub(start) > s.ttl/3 {
		if err := s.k.confirmFirst(ctx, received); err != nil {
			return nil, s.abandon(ctx, err)
		}
	}
	go s.k.watch(true)
	return s, nil
}

func newSession(c *Client, info wire.Session, start time.Time) *Session {
	s := &Session{c: c, info: info, ttl: time.Duration(info.TTLMillis) * time.Millisecond}
	s.k = newKeeper(s.ttl, start, c.log, "fencer session lost", []any{"session", info.Session}, s.sendRenewal)
	return s
}

// abandon closes a session that NewSession could not confirm, so that it
// is not left for a TTL to nobody, and returns why.
func (s *Session) abandon(ctx context.Context, cause error) error {
	s.k.cancel(cause)
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.c.timeout)
	defer cancel()
	_, rerr := s.c.CloseSessionRaw(ctx, s.ID(), s.Secret())
	var after string
	switch {
	case rerr == nil:
		after = "closed it"
	case errors.Is(rerr, ErrSessionExpired), errors.Is(rerr, ErrUnknownSession):
		after = "it had ended already"
	default:
		after = fmt.Sprintf("its close failed too (%v); the server ends it within %v", rerr, s.ttl)
	}
	return fmt.Errorf("session %d created, but it could not be confirmed: %w; %s", s.ID(), cause, after)
}

// sendRenewal renews the session on the server, as Lease.sendRenewal a
// grant.
func (s *Session) sendRenewal(ctx context.Context) (time.Time, error) {
	r := &transport.Request{
		Path:           sessionPath(s.ID(), "renew"),
		AttemptTimeout: max(s.ttl/3, 100*time.Millisecond),
		UntilDone:      true,
	}
	var out wire.SessionRenewResponse
	if err := s.c.tr.PostJSON(ctx, r, wire.SessionLeaseRequest{Lease: s.Secret()}, &out); err != nil {
		return r.Sent, err
	}
	return r.Sent, checkSessionRenewal(out, s.ID(), s.info.TTLMillis)
}

func sessionPath(id uint64, op string) string {
	if op == "" {
		return "/v1/sessions/" + strconv.FormatUint(id, 10)
	}
	return "/v1/sessions/" + strconv.FormatUint(id, 10) + "/" + op
}

// ID is the session's id: the index of the entry that created it.
func (s *Session) ID() uint64 { return s.info.Session }

// Holder is the session's holder.
func (s *Session) Holder() string { return s.info.Holder }

// Secret is the session's lease secret, which renew, close and every
// acquire under the session present.
func (s *Session) Secret() string { return s.info.Lease }

// TTL is the session's time to live as granted.
func (s *Session) TTL() time.Duration { return s.ttl }

// Info is the server's answer to the creation.
func (s *Session) Info() wire.Session { return s.info }

// Deadline is the local deadline, as a Lease's: the server cannot have
// expired the session before it.
func (s *Session) Deadline() time.Time { return s.k.deadline() }

// Done is closed when the session is lost or closed.
func (s *Session) Done() <-chan struct{} {
	s.k.checkDeadline()
	return s.k.ctx.Done()
}

// Context is cancelled when the session is lost or closed; its cause is
// Err. The Context of every grant under the session is a child of it.
func (s *Session) Context() context.Context {
	s.k.checkDeadline()
	return s.k.ctx
}

// Err is nil while the session is held; afterwards ErrReleased (closed),
// for a refused renewal an error matching the refusal (ErrSessionExpired,
// ErrUnknownSession, ErrSessionMismatch), or ErrLeaseExpired (no renewal
// confirmed before the local deadline). It reads the clock itself, as
// Lease.Err does.
func (s *Session) Err() error { return s.k.err() }

// Renew renews the session now, as Lease.Renew a grant: a refusal ends
// the session and every grant under it.
func (s *Session) Renew(ctx context.Context) error {
	if err := s.Err(); err != nil {
		return err
	}
	return s.k.renew(ctx, false)
}

// Close ends the session and every grant under it, in one entry on the
// server, and returns the grants it released. The session's context (and
// every grant's) is cancelled first, so work under them stops before
// anything is free. If the session had been lost already, Close still
// tries and returns the loss. A second Close returns nil, nil; so does a
// Close whose first attempt closed the session but whose answer, with the
// list of grants, was lost.
func (s *Session) Close(ctx context.Context) ([]wire.SessionGrant, error) {
	s.closeMu.Lock()
	defer s.closeMu.Unlock()
	if s.closed {
		return nil, nil
	}
	s.closed = true
	lost := s.Err()
	// Cancelled before the watcher is stopped: that cuts short a renewal
	// in flight, which would otherwise hold Close up to the deadline.
	s.k.lose(ErrReleased)
	s.k.stopWatch()
	out, err := s.c.CloseSessionRaw(ctx, s.ID(), s.Secret())
	if lost != nil {
		return out.Released, lost
	}
	return out.Released, err
}

// Lock takes the lock name under the session, waiting up to Wait if it is
// held. The Lease has a token and secret of its own, for fencing and
// Release, but no keep-alive: it lives as long as the session, its
// Deadline is the session's, and its Done closes when the session's does
// (or on Release). Releasing it keeps the session and its other grants.
// The options are Acquire's, but for TTL (the session's rules) and
// NoKeepAlive (there is nothing to keep alive); the holder defaults to the
// session's. A session lost while the acquire waits ends it with the
// session's Err.
func (s *Session) Lock(ctx context.Context, name string, opts ...AcquireOption) (*Lease, error) {
	o, err := s.acquireOptions(opts)
	if err != nil {
		return nil, err
	}
	body := sessionAcquire{AcquireRequest: wire.AcquireRequest{
		Holder:    o.holder,
		WaitMs:    o.wait.Milliseconds(),
		RequestID: newRequestID(),

		LockDelayMillis: o.lockDelay.Milliseconds(),
		Value:           o.value,
		Session:         s.ID(),
		SessionLease:    s.Secret(),
		Mode:            o.wireMode(),
	}}
	r := &transport.Request{Path: lockPath(name, "acquire"), Extra: o.wait}
	var g wire.Grant
	if err := s.post(ctx, r, body, &g); err != nil {
		return nil, err
	}
	if err := checkSessionGrant(g, "locks", name, body.Holder, s.ID(), s.info.TTLMillis, body.RequestID); err != nil {
		return nil, err
	}
	if err := checkMode(g, body.Mode); err != nil {
		return nil, err
	}
	return s.hold(ctx, g, "locks")
}

// AcquirePermit takes one of the limit permits of the semaphore name under
// the session, as Client.AcquirePermit does but for the lease, which is
// the session's as for Lock.
func (s *Session) AcquirePermit(ctx context.Context, name string, limit int, opts ...AcquireOption) (*Lease, error) {
	o, err := s.acquireOptions(opts)
	if err != nil {
		return nil, err
	}
	if err := checkLimit(limit); err != nil {
		return nil, err
	}
	body := sessionSemAcquire{SemAcquireRequest: wire.SemAcquireRequest{
		Holder:    o.holder,
		Limit:     limit,
		WaitMs:    o.wait.Milliseconds(),
		RequestID: newRequestID(),

		LockDelayMillis: o.lockDelay.Milliseconds(),
		Session:         s.ID(),
		SessionLease:    s.Secret(),
	}}
	r := &transport.Request{Path: kindPath("semaphores", name, "acquire"), Extra: o.wait}
	var p wire.PermitGrant
	if err := s.post(ctx, r, body, &p); err != nil {
		return nil, err
	}
	g := permitGrant(p)
	if err := checkSessionGrant(g, "semaphores", name, body.Holder, s.ID(), s.info.TTLMillis, body.RequestID); err != nil {
		return nil, err
	}
	if err := checkPermit(p, limit); err != nil {
		return nil, err
	}
	l, err := s.hold(ctx, g, "semaphores")
	if l != nil {
		l.held = p.Held
	}
	return l, err
}

// Campaign blocks until this caller leads the election name under the
// session, or ctx ends, as Client.Campaign does; the leadership lives as
// long as the session.
func (s *Session) Campaign(ctx context.Context, name, value string, opts ...AcquireOption) (*Lease, error) {
	return campaign(ctx, s.Lock, name, value, opts)
}

// acquireOptions applies opts for a grant under the session.
func (s *Session) acquireOptions(opts []AcquireOption) (acquireOptions, error) {
	var o acquireOptions
	for _, opt := range opts {
		opt(&o)
	}
	if o.ttl != 0 {
		return o, refuse(wire.CodeInvalidTTL, "ttl %v: a grant under session %d lives as long as the session (SessionTTL sets the session's)", o.ttl, s.ID())
	}
	if o.holder == "" {
		o.holder = s.Holder()
	}
	return o, o.check()
}

// post sends an acquire under the session, which a loss of the session
// cuts short: a grant it would bring could not be trusted.
func (s *Session) post(ctx context.Context, r *transport.Request, in, out any) error {
	if err := s.Err(); err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(s.k.ctx, cancel)
	defer stop()
	err := s.c.tr.PostJSON(ctx, r, in, out)
	if lost := s.Err(); err != nil && lost != nil {
		return fmt.Errorf("session %d ended during the acquire: %w", s.ID(), lost)
	}
	return err
}

// hold makes the Lease of a grant under the session: the session's keeper,
// and a context of its own under the session's.
func (s *Session) hold(ctx context.Context, g wire.Grant, kind string) (*Lease, error) {
	l := &Lease{c: s.c, kind: kind, grant: g, ttl: s.ttl, k: s.k, session: s}
	l.ctx, l.cancel = context.WithCancelCause(s.k.ctx)
	if err := s.Err(); err != nil {
		// The session's local deadline passed while the grant was on its
		// way: the server may have ended both already.
		return nil, l.abandon(ctx, err)
	}
	return l, nil
}

// sessionAcquire and sessionSemAcquire are the acquire bodies under a
// session, which carry no ttl_ms: the wire's field is sent even when 0,
// and an explicit 0 is refused (invalid_ttl). The outer field, nil unless
// a raw caller sets a TTL, shadows the embedded one in encoding/json.
type sessionAcquire struct {
	wire.AcquireRequest
	TTLMillis *int64 `json:"ttl_ms,omitempty"`
}

type sessionSemAcquire struct {
	wire.SemAcquireRequest
	TTLMillis *int64 `json:"ttl_ms,omitempty"`
}

// orNil is the address of a non-zero v, nil for 0.
func orNil(v int64) *int64 {
	if v == 0 {
		return nil
	}
	return &v
}

// Session returns a session's holder, remaining time and grants (never its
// secret).
func (c *Client) Session(ctx context.Context, id uint64) (wire.SessionStatus, error) {
	var st wire.SessionStatus
	err := c.tr.GetJSON(ctx, sessionPath(id, ""), nil, &st)
	return st, err
}

// Sessions lists the sessions whose holder the caller may read.
func (c *Client) Sessions(ctx context.Context) ([]wire.SessionStatus, error) {
	var out wire.SessionList
	err := c.tr.GetJSON(ctx, "/v1/sessions", nil, &out)
	return out.Sessions, err
}

// CreateSessionRaw creates a session as NewSession does, with one request
// id across its attempts (req.RequestID, or a random one when that is
// empty), but keeps nothing alive: it is for tools that keep the session
// themselves, as the command-line client does. A TTLMillis of 0 means
// DefaultTTL, as for AcquireRaw.
func (c *Client) CreateSessionRaw(ctx context.Context, req wire.SessionRequest) (wire.Session, error) {
	if req.RequestID == "" {
		req.RequestID = newRequestID()
	}
	if req.TTLMillis == 0 {
		req.TTLMillis = wire.DefaultTTL.Milliseconds()
	}
	var out wire.Session
	if err := c.tr.PostJSON(ctx, &transport.Request{Path: "/v1/sessions"}, req, &out); err != nil {
		return out, err
	}
	return out, checkSession(out, req)
}

// RenewSessionRaw renews a session known only by its id and secret. It
// does not track any deadline.
func (c *Client) RenewSessionRaw(ctx context.Context, id uint64, lease string) (wire.SessionRenewResponse, error) {
	var out wire.SessionRenewResponse
	if err := c.tr.PostJSON(ctx, &transport.Request{Path: sessionPath(id, "renew")}, wire.SessionLeaseRequest{Lease: lease}, &out); err != nil {
		return out, err
	}
	return out, checkSessionRenewal(out, id, 0)
}

// CloseSessionRaw closes a session known only by its id and secret, and
// with it every grant under it. It retries freely: if an earlier attempt
// may have closed the session, a later session_expired or unknown_session
// means it did, and the list of grants released, lost with that attempt's
// answer, is empty.
func (c *Client) CloseSessionRaw(ctx context.Context, id uint64, lease string) (wire.SessionCloseResponse, error) {
	r := &transport.Request{Path: sessionPath(id, "close")}
	var out wire.SessionCloseResponse
	err := c.tr.PostJSON(ctx, r, wire.SessionLeaseRequest{Lease: lease}, &out)
	if err != nil && r.Uncertain && (errors.Is(err, ErrSessionExpired) || errors.Is(err, ErrUnknownSession)) {
		return wire.SessionCloseResponse{Session: id, Released: []wire.SessionGrant{}}, nil
	}
	if err != nil {
		return wire.SessionCloseResponse{}, err
	}
	return out, checkSessionClose(out, id)
}
