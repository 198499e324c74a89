package client

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/fencer-io/fencer/api/client/internal/transport"
	"github.com/fencer-io/fencer/api/wire"
)

// AcquireOption tunes Acquire.
type AcquireOption func(*acquireOptions)

type acquireOptions struct {
	ttl       time.Duration
	wait      time.Duration
	holder    string
	keepAlive bool
	lockDelay time.Duration
	value     string
	mode      string
}

// TTL sets the lease's time to live (default wire.DefaultTTL, 10s). It is
// truncated to whole milliseconds and must be within wire.MinTTL..MaxTTL.
func TTL(d time.Duration) AcquireOption { return func(o *acquireOptions) { o.ttl = d } }

// Wait makes Acquire queue for up to d while the lock is held (default 0:
// fail at once with ErrLockHeld).
func Wait(d time.Duration) AcquireOption { return func(o *acquireOptions) { o.wait = d } }

// Holder names the holder, for humans reading lock status (default
// "hostname-pid").
func Holder(h string) AcquireOption { return func(o *acquireOptions) { o.holder = h } }

// LockDelay asks that, if this grant ends by expiry (not release), nobody
// can acquire the lock for d (at most wire.MaxLockDelay): a holder that lost
// its lease without noticing has that long to stop before anybody else
// starts. Acquires in the delay fail with ErrLockDelay.
func LockDelay(d time.Duration) AcquireOption { return func(o *acquireOptions) { o.lockDelay = d } }

// Value publishes v (at most wire.MaxLockValue bytes) with the grant, in the
// lock's status and list: an election's leader its address, say.
func Value(v string) AcquireOption { return func(o *acquireOptions) { o.value = v } }

// Mode asks for a lock in mode m: wire.ModeShared (many may hold the lock
// at once, none while it is held exclusively; a shared grant reads, and
// its fenced writes under the lock are refused with ErrNotLockHolder) or
// wire.ModeExclusive, the default. The lock's queue is FIFO across modes.
// Locks only: a semaphore's permit has no mode.
func Mode(m string) AcquireOption { return func(o *acquireOptions) { o.mode = m } }

// NoKeepAlive leaves renewals to the caller (Lease.Renew). The lease still
// declares itself lost at its local deadline.
func NoKeepAlive() AcquireOption { return func(o *acquireOptions) { o.keepAlive = false } }

// newAcquireOptions applies opts over the defaults and checks them against
// the contract's limits, for a lock's grant and a semaphore's permit alike.
func newAcquireOptions(opts []AcquireOption) (acquireOptions, error) {
	o := acquireOptions{ttl: wire.DefaultTTL, keepAlive: true}
	for _, opt := range opts {
		opt(&o)
	}
	if o.holder == "" {
		o.holder = DefaultHolder()
	}
	o.ttl = o.ttl.Truncate(time.Millisecond)
	if o.ttl < wire.MinTTL || o.ttl > wire.MaxTTL {
		return o, refuse(wire.CodeInvalidTTL, "ttl %v: want %v to %v", o.ttl, wire.MinTTL, wire.MaxTTL)
	}
	return o, o.check()
}

// check checks what a grant with a lease of its own and one under a
// session ask alike.
func (o acquireOptions) check() error {
	switch {
	case o.wait < 0 || o.wait > wire.MaxWait:
		return refuse(wire.CodeInvalidWait, "wait %v: want 0 to %v", o.wait, wire.MaxWait)
	case o.lockDelay < 0 || o.lockDelay > wire.MaxLockDelay:
		return refuse(wire.CodeInvalidLockDelay, "lock-delay %v: want 0 to %v", o.lockDelay, wire.MaxLockDelay)
	case o.mode != "" && o.mode != wire.ModeShared && o.mode != wire.ModeExclusive:
		return refuse(wire.CodeInvalidMode, "mode %q: want %q or %q", o.mode, wire.ModeShared, wire.ModeExclusive)
	}
	return nil
}

// wireMode is the mode an acquire asks for on the wire: absent for an
// exclusive lock, as every client before modes sent it.
func (o acquireOptions) wireMode() string {
	if o.mode == wire.ModeShared {
		return wire.ModeShared
	}
	return ""
}

// checkMode refuses a grant in another mode than asked.
func checkMode(g wire.Grant, asked string) error {
	if g.Mode != asked {
		return badAnswer(fmt.Sprintf("acquire lock %q", g.Lock), "the answer is a grant in mode %q, not %q as asked", g.Mode, asked)
	}
	return nil
}

// Shared reports whether the lease is a lock's shared grant.
func (l *Lease) Shared() bool { return l.grant.Mode == wire.ModeShared }

// DefaultHolder is "hostname-pid".
func DefaultHolder() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "unknown"
	}
	return host + "-" + strconv.Itoa(os.Getpid())
}

// Margin returns the safety margin by which a lease's local deadline precedes
// the server's: a tenth of the TTL, at least 50ms, at most half the TTL. It
// absorbs clock-rate differences between client and server (up to 10%) and
// the time between reading the clock and acting on the lease.
func Margin(ttl time.Duration) time.Duration {
	return min(max(ttl/10, 50*time.Millisecond), ttl/2)
}

// Lease is a held lock. Its context is cancelled, and Done closed, as soon
// as the client can no longer be sure it holds the lock; Err says why.
type Lease struct {
	c     *Client
	kind  string // "locks", or "semaphores" for a permit (Grant.Lock is then the semaphore)
	mu    sync.Mutex
	grant wire.Grant // its Value changes on Proclaim, under mu
	held  int        // a permit's: the permits held once it was granted
	ttl   time.Duration

	// k keeps the lease alive: the lease's own, or for a grant held under
	// a session, the session's (which the lease must not stop or end).
	k       *keeper
	session *Session

	// ctx is k's for a lease of its own, a child of the session's for a
	// grant under one, so that releasing the grant ends only the grant.
	ctx    context.Context
	cancel context.CancelCauseFunc

	releaseMu sync.Mutex
	released  bool
}

// Acquire takes the lock name, waiting up to Wait if it is held, and keeps
// the lease alive in the background until Release or loss. ctx bounds only
// the acquire itself.
//
// Every attempt carries the same random request id, so a retry after a lost
// answer returns the first grant instead of taking a second token.
func (c *Client) Acquire(ctx context.Context, name string, opts ...AcquireOption) (*Lease, error) {
	o, err := newAcquireOptions(opts)
	if err != nil {
		return nil, err
	}
	body := wire.AcquireRequest{
		Holder:    o.holder,
		TTLMillis: o.ttl.Milliseconds(),
		WaitMs:    o.wait.Milliseconds(),
		RequestID: newRequestID(),

		LockDelayMillis: o.lockDelay.Milliseconds(),
		Value:           o.value,
		Mode:            o.wireMode(),
	}
	r := &transport.Request{Path: lockPath(name, "acquire"), Extra: o.wait}
	var g wire.Grant
	if err := c.tr.PostJSON(ctx, r, body, &g); err != nil {
		return nil, err
	}
	// A grant that does not match the request is not used: the client
	// cannot tell what, if anything, it holds. One the server did make
	// expires after its TTL.
	if err := checkGrant(g, "locks", name, body.Holder, body.TTLMillis, body.RequestID); err != nil {
		return nil, err
	}
	if err := checkMode(g, body.Mode); err != nil {
		return nil, err
	}
	return c.hold(ctx, g, "locks", r, o.keepAlive)
}

// hold makes a Lease of a grant of kind ("locks" or "semaphores") that r
// asked for, and starts keeping it alive.
func (c *Client) hold(ctx context.Context, g wire.Grant, kind string, r *transport.Request, keepAlive bool) (*Lease, error) {
	// The server starts the lease when it applies the grant, after the
	// request that asked for it was sent: the attempt that answered, or
	// for a retry answered with an earlier grant, the first attempt.
	start := r.Sent
	if g.Existing {
		start = r.FirstSent
	}
	l := newLease(c, g, start)
	l.kind = kind
	if received := time.Now(); received.Sub(start) > l.ttl/3 {
		// After a wait in the queue or slow retries, start is a safe but
		// stale bound (older than the TTL itself, after a long wait):
		// renew once, and measure the lease from that renewal (doc.go).
		if err := l.k.confirmFirst(ctx, received); err != nil {
			return nil, l.abandon(ctx, err)
		}
	}
	go l.k.watch(keepAlive)
	return l, nil
}

// abandon gives back a grant that Acquire could not confirm, so that the
// lock is not left held for a TTL by nobody, and returns why. The release
// runs even when ctx has ended (it bounded the acquire, not the cleanup).
func (l *Lease) abandon(ctx context.Context, cause error) error {
	l.cancel(cause)
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), l.c.timeout)
	defer cancel()
	rerr := l.c.releaseKind(ctx, l.kind, l.grant.Lock, l.grant.Token, l.grant.Lease, &struct{}{})
	var after string
	switch {
	case rerr == nil:
		after = "released it"
	case errors.Is(rerr, ErrLeaseLost):
		after = "it had ended already"
	case l.session != nil:
		after = fmt.Sprintf("its release failed too (%v); it ends with session %d", rerr, l.session.ID())
	default:
		after = fmt.Sprintf("its release failed too (%v); the server frees it within %v", rerr, l.ttl)
	}
	return fmt.Errorf("%s %q granted with token %d, but the grant could not be confirmed: %w; %s", kindNoun(l.kind), l.grant.Lock, l.grant.Token, cause, after)
}

// newLease makes the Lease of a grant of its own (not under a session),
// its lease started at start, with no watcher yet.
func newLease(c *Client, g wire.Grant, start time.Time) *Lease {
	l := &Lease{c: c, kind: "locks", grant: g, ttl: time.Duration(g.TTLMillis) * time.Millisecond}
	l.k = newKeeper(l.ttl, start, c.log, "fencer lease lost", []any{"lock", g.Lock, "token", g.Token}, l.sendRenewal)
	l.ctx, l.cancel = l.k.ctx, l.k.cancel
	return l
}

func newRequestID() string {
	var b [16]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

func lockPath(name, op string) string { return kindPath("locks", name, op) }

func kindPath(kind, name, op string) string {
	if op == "" {
		return "/v1/" + kind + "/" + url.PathEscape(name)
	}
	return "/v1/" + kind + "/" + url.PathEscape(name) + "/" + op // one allocation
}

// Token is the fencing token: pass it with every write the lock protects.
func (l *Lease) Token() uint64 { return l.grant.Token }

// Name is the lock's name.
func (l *Lease) Name() string { return l.grant.Lock }

// Holder is the holder name the lock was granted to.
func (l *Lease) Holder() string { return l.grant.Holder }

// TTL is the lease's time to live as granted (for a grant under a session,
// the session's).
func (l *Lease) TTL() time.Duration { return l.ttl }

// Secret is the lease secret that renew and release need.
func (l *Lease) Secret() string { return l.grant.Lease }

// Grant is the server's answer to the acquire.
func (l *Lease) Grant() wire.Grant { return l.grant }

// Session is the session the grant is held under, nil for a grant with a
// lease of its own.
func (l *Lease) Session() *Session { return l.session }

// Deadline is the local deadline: the send time of the last confirmed
// renewal (or of the acquire) plus TTL minus Margin. The server cannot have
// expired the lease before it. For a grant under a session it is the
// session's.
func (l *Lease) Deadline() time.Time { return l.k.deadline() }

// Done is closed when the lease is lost or released (for a grant under a
// session, also when the session is lost or closed).
func (l *Lease) Done() <-chan struct{} {
	l.k.checkDeadline()
	return l.ctx.Done()
}

// Context is cancelled when the lease is lost or released; its cause is Err.
func (l *Lease) Context() context.Context {
	l.k.checkDeadline()
	return l.ctx
}

// Err is nil while the lease is held. Afterwards it is ErrReleased, or says
// why the lease was lost: an error matching ErrLeaseLost (the server refused
// a renewal) or ErrLeaseExpired (no renewal confirmed before the local
// deadline). It reads the clock itself, so a process that was paused past
// its deadline sees the loss on its first call, before any timer has run.
// A grant under a session ends with the session, with the session's Err.
func (l *Lease) Err() error {
	l.k.checkDeadline()
	if l.ctx.Err() == nil {
		return nil
	}
	return context.Cause(l.ctx)
}

// Renew renews the lease now. A refusal ends the lease (ErrLeaseLost);
// other errors, ErrBadAnswer among them, leave it to the local deadline:
// only an answer that names this grant and its TTL confirms a renewal.
// A grant under a session is renewed by renewing its session (the server
// refuses a renewal of the grant itself, ErrSessionGrant): Renew does that.
func (l *Lease) Renew(ctx context.Context) error {
	if err := l.Err(); err != nil {
		return err
	}
	if l.session != nil {
		return l.session.Renew(ctx)
	}
	return l.k.renew(ctx, false)
}

// sendRenewal renews the lease on the server, retrying across nodes until
// an attempt is answered or ctx ends, and returns that attempt's send time.
// Attempts are cut at a third of the TTL so that a hung leader leaves time
// to try another node.
func (l *Lease) sendRenewal(ctx context.Context) (time.Time, error) {
	r := &transport.Request{
		Path:           kindPath(l.kind, l.grant.Lock, "renew"),
		AttemptTimeout: max(l.ttl/3, 100*time.Millisecond),
		UntilDone:      true,
	}
	var out renewAnswer
	if err := l.c.tr.PostJSON(ctx, r, wire.LeaseRequest{Lease: l.grant.Lease, Token: l.grant.Token}, &out); err != nil {
		return r.Sent, err
	}
	return r.Sent, checkRenewal(out, l.kind, l.grant.Lock, l.grant.Token, l.grant.TTLMillis)
}

// Release ends the lease and frees the lock. The lease's context is
// cancelled first, so work under it stops before the lock is free. If the
// lease had been lost already, Release still tries to free the lock and
// returns the loss (Err). A second Release returns nil. Releasing a grant
// held under a session leaves the session and its other grants held.
func (l *Lease) Release(ctx context.Context) error {
	l.releaseMu.Lock()
	defer l.releaseMu.Unlock()
	if l.released {
		return nil
	}
	l.released = true
	lost := l.Err()
	if l.session == nil {
		// Only a lease of its own has a watcher to stop; a session's
		// keeps the session's other grants.
		l.k.stopWatch()
	}
	l.cancel(ErrReleased)
	err := l.c.releaseKind(ctx, l.kind, l.grant.Lock, l.grant.Token, l.grant.Lease, &struct{}{})
	if lost != nil {
		return lost
	}
	return err
}

// AcquireRaw asks for a grant of lock name as Acquire does, retried with
// one request id across all its attempts (req.RequestID, or a random one
// when that is empty), so that a retry after a lost answer gets the first
// grant back (Existing) rather than a second token. Unlike Acquire it keeps
// no lease: nothing renews the grant or tracks its deadline, and req is
// sent as given (its TTL and wait are checked by the server), but for a
// TTLMillis of 0, which means DefaultTTL as it does for Acquire, or under
// a session (req.Session and SessionLease) no ttl_ms at all. It is for
// tools that keep the grant themselves, as the benchmark does.
func (c *Client) AcquireRaw(ctx context.Context, name string, req wire.AcquireRequest) (wire.Grant, error) {
	if req.RequestID == "" {
		req.RequestID = newRequestID()
	}
	var g wire.Grant
	r := &transport.Request{Path: lockPath(name, "acquire"), Extra: time.Duration(req.WaitMs) * time.Millisecond}
	if req.Session != 0 {
		if err := c.tr.PostJSON(ctx, r, sessionAcquire{AcquireRequest: req, TTLMillis: orNil(req.TTLMillis)}, &g); err != nil {
			return g, err
		}
		return g, checkSessionGrant(g, "locks", name, req.Holder, req.Session, wire.MaxTTL.Milliseconds(), req.RequestID)
	}
	// The wire struct cannot say "no TTL given" but by 0, which the server
	// refuses as an explicit TTL of 0 (invalid_ttl): send the default, as
	// Acquire does without a TTL option.
	if req.TTLMillis == 0 {
		req.TTLMillis = wire.DefaultTTL.Milliseconds()
	}
	if err := c.tr.PostJSON(ctx, r, req, &g); err != nil {
		return g, err
	}
	return g, checkGrant(g, "locks", name, req.Holder, req.TTLMillis, req.RequestID)
}

// RenewRaw renews the lease of a grant known only by its token and secret,
// as the command-line client does. It does not track any deadline.
func (c *Client) RenewRaw(ctx context.Context, name string, token uint64, lease string) (wire.RenewResponse, error) {
	var out renewAnswer
	if err := c.tr.PostJSON(ctx, &transport.Request{Path: lockPath(name, "renew")}, wire.LeaseRequest{Lease: lease, Token: token}, &out); err != nil {
		return wire.RenewResponse{}, err
	}
	if err := checkRenewal(out, "locks", name, token, 0); err != nil {
		return wire.RenewResponse{}, err
	}
	return wire.RenewResponse{Lock: out.Lock, Token: out.Token, TTLMillis: out.TTLMillis}, nil
}

// ReleaseRaw releases a grant known only by its token and secret.
func (c *Client) ReleaseRaw(ctx context.Context, name string, token uint64, lease string) (wire.ReleaseResponse, error) {
	// What the release answers; kept when an earlier attempt released it.
	out := wire.ReleaseResponse{Lock: name, Token: token, Released: true}
	if err := c.releaseKind(ctx, "locks", name, token, lease, &out); err != nil {
		return wire.ReleaseResponse{}, err
	}
	return out, nil
}

// releaseKind releases a lock's grant or a semaphore's permit and decodes
// the answer into out. It retries freely: if an earlier attempt may have
// released the lease, a later lease_lost means it did, and out is left as
// it was.
func (c *Client) releaseKind(ctx context.Context, kind, name string, token uint64, lease string, out any) error {
	r := &transport.Request{Path: kindPath(kind, name, "release")}
	err := c.tr.PostJSON(ctx, r, wire.LeaseRequest{Lease: lease, Token: token}, out)
	if err != nil && r.Uncertain && errors.Is(err, ErrLeaseLost) {
		return nil
	}
	return err
}
