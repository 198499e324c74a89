package client

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	mrand "math/rand/v2"
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
	switch {
	case o.ttl < wire.MinTTL || o.ttl > wire.MaxTTL:
		return o, fmt.Errorf("%w: ttl %v: want %v to %v", ErrInvalid, o.ttl, wire.MinTTL, wire.MaxTTL)
	case o.wait < 0 || o.wait > wire.MaxWait:
		return o, fmt.Errorf("%w: wait %v: want 0 to %v", ErrInvalid, o.wait, wire.MaxWait)
	case o.lockDelay < 0 || o.lockDelay > wire.MaxLockDelay:
		return o, fmt.Errorf("%w: lock-delay %v: want 0 to %v", ErrInvalid, o.lockDelay, wire.MaxLockDelay)
	}
	return o, nil
}

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
	c      *Client
	kind   string // "locks", or "semaphores" for a permit (Grant.Lock is then the semaphore)
	grant  wire.Grant
	held   int // a permit's: the permits held once it was granted
	ttl    time.Duration
	margin time.Duration

	ctx    context.Context
	cancel context.CancelCauseFunc

	mu        sync.Mutex
	confirmed time.Time // send time of the last confirmed acquire or renewal
	due       time.Time // when the keep-alive renews next
	lastErr   error     // the last failed renewal, for the loss message

	moved     chan struct{} // a manual renewal moved the deadline
	stop      chan struct{} // closed by Release
	stopOnce  sync.Once
	stopped   chan struct{} // closed when the watcher exits
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
		if err := l.confirmGrant(ctx, received); err != nil {
			return nil, l.abandon(ctx, err)
		}
	}
	go l.watch(keepAlive)
	return l, nil
}

// confirmGrant renews a grant that Acquire has not handed out yet, and
// moves its deadline to that renewal. The deadline known so far may have
// passed already, so unlike Renew it does not bound the renewal by it: a
// renewal the server accepts proves the lease current whenever it was sent.
// It gives up a TTL after the grant arrived, when the server, having
// started the lease before that, has expired it unless a new leader
// restarted it.
func (l *Lease) confirmGrant(ctx context.Context, received time.Time) error {
	ctx, cancel := context.WithDeadline(ctx, received.Add(l.ttl))
	defer cancel()
	sent, err := l.sendRenewal(ctx)
	if err != nil {
		return err
	}
	l.confirm(sent)
	// Only a renewal whose attempt hung for most of a TTL leaves a
	// deadline in the past.
	return l.Err()
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
	default:
		after = fmt.Sprintf("its release failed too (%v); the server frees it within %v", rerr, l.ttl)
	}
	return fmt.Errorf("lock %q granted with token %d, but the grant could not be confirmed: %w; %s", l.grant.Lock, l.grant.Token, cause, after)
}

func newLease(c *Client, g wire.Grant, start time.Time) *Lease {
	ttl := time.Duration(g.TTLMillis) * time.Millisecond
	l := &Lease{
		c:       c,
		kind:    "locks",
		grant:   g,
		ttl:     ttl,
		margin:  Margin(ttl),
		moved:   make(chan struct{}, 1),
		stop:    make(chan struct{}),
		stopped: make(chan struct{}),
	}
	l.ctx, l.cancel = context.WithCancelCause(context.Background())
	l.confirm(start)
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

// TTL is the lease's time to live as granted.
func (l *Lease) TTL() time.Duration { return l.ttl }

// Secret is the lease secret that renew and release need.
func (l *Lease) Secret() string { return l.grant.Lease }

// Grant is the server's answer to the acquire.
func (l *Lease) Grant() wire.Grant { return l.grant }

// Deadline is the local deadline: the send time of the last confirmed
// renewal (or of the acquire) plus TTL minus Margin. The server cannot have
// expired the lease before it.
func (l *Lease) Deadline() time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.deadlineLocked()
}

func (l *Lease) deadlineLocked() time.Time { return l.confirmed.Add(l.ttl - l.margin) }

// Done is closed when the lease is lost or released.
func (l *Lease) Done() <-chan struct{} {
	l.checkDeadline()
	return l.ctx.Done()
}

// Context is cancelled when the lease is lost or released; its cause is Err.
func (l *Lease) Context() context.Context {
	l.checkDeadline()
	return l.ctx
}

// Err is nil while the lease is held. Afterwards it is ErrReleased, or says
// why the lease was lost: an error matching ErrLeaseLost (the server refused
// a renewal) or ErrLeaseExpired (no renewal confirmed before the local
// deadline). It reads the clock itself, so a process that was paused past
// its deadline sees the loss on its first call, before any timer has run.
func (l *Lease) Err() error {
	l.checkDeadline()
	if l.ctx.Err() == nil {
		return nil
	}
	return context.Cause(l.ctx)
}

func (l *Lease) checkDeadline() {
	if l.ctx.Err() != nil {
		return
	}
	if now := time.Now(); !now.Before(l.Deadline()) {
		l.lose(l.expired(now))
	}
}

func (l *Lease) expired(now time.Time) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	err := fmt.Errorf("%w (last confirmed %v ago, ttl %v, margin %v)", ErrLeaseExpired, now.Sub(l.confirmed).Round(time.Millisecond), l.ttl, l.margin)
	if l.lastErr != nil {
		err = fmt.Errorf("%w; last renewal error: %w", err, l.lastErr)
	}
	return err
}

// lose ends the lease with cause; the first cause wins.
func (l *Lease) lose(cause error) {
	if l.ctx.Err() != nil {
		return
	}
	l.cancel(cause)
	if !errors.Is(cause, ErrReleased) {
		l.c.log.Warn("fencer lease lost", "lock", l.grant.Lock, "token", l.grant.Token, "err", cause)
	}
}

// confirm records a renewal sent at sent, moving the deadline.
func (l *Lease) confirm(sent time.Time) {
	l.mu.Lock()
	if l.ctx.Err() == nil && sent.After(l.confirmed) {
		l.confirmed = sent
		l.lastErr = nil
		// Renew at about a third of the TTL, ±10%, so that two renewals
		// can fail before the deadline.
		third := l.ttl / 3
		l.due = sent.Add(third - third/10 + mrand.N(third/5+1))
	}
	l.mu.Unlock()
	select {
	case l.moved <- struct{}{}:
	default:
	}
}

// watch enforces the local deadline and, with keepAlive, renews when due.
func (l *Lease) watch(keepAlive bool) {
	defer close(l.stopped)
	t := time.NewTimer(time.Hour)
	defer t.Stop()
	for {
		l.checkDeadline()
		if l.ctx.Err() != nil {
			return
		}
		now := time.Now()
		l.mu.Lock()
		deadline, due := l.deadlineLocked(), l.due
		l.mu.Unlock()
		wake := deadline
		if keepAlive && due.Before(wake) {
			wake = due
		}
		t.Reset(wake.Sub(now))
		select {
		case <-l.stop:
			return
		case <-l.ctx.Done():
			return
		case <-l.moved:
			continue
		case <-t.C:
		}
		if keepAlive && !time.Now().Before(due) {
			l.renew(context.Background(), true)
		}
	}
}

// Renew renews the lease now. A refusal ends the lease (ErrLeaseLost);
// other errors, ErrBadAnswer among them, leave it to the local deadline:
// only an answer that names this grant and its TTL confirms a renewal.
func (l *Lease) Renew(ctx context.Context) error {
	if err := l.Err(); err != nil {
		return err
	}
	return l.renew(ctx, false)
}

// renew sends one renewal, retrying until it is answered or the local
// deadline passes: by then the lease has been declared lost, and a loss is
// final.
func (l *Lease) renew(ctx context.Context, background bool) error {
	ctx, cancel := context.WithDeadline(ctx, l.Deadline())
	defer cancel()
	stop := context.AfterFunc(l.ctx, cancel)
	defer stop()
	sent, err := l.sendRenewal(ctx)
	switch {
	case err == nil:
		l.confirm(sent)
		return nil
	case refused(err):
		l.lose(fmt.Errorf("renewal refused: %w", err))
		return l.Err()
	}
	l.mu.Lock()
	l.lastErr = err
	if background {
		// Try again soon, not at once: a renewal that failed without
		// retrying (ErrBadAnswer) would otherwise be resent in a loop
		// until the deadline. The deadline still rules.
		l.due = time.Now().Add(min(l.ttl/10, time.Second))
	}
	l.mu.Unlock()
	if background {
		l.c.log.Debug("fencer renewal failed", "lock", l.grant.Lock, "token", l.grant.Token, "err", err)
	}
	if lerr := l.Err(); lerr != nil {
		return lerr
	}
	return err
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

// refused reports whether the server answered with a definite no.
func refused(err error) bool {
	var ae *APIError
	return errors.As(err, &ae) && ae.Status >= 400 && ae.Status < 500
}

func (l *Lease) stopWatch() {
	l.stopOnce.Do(func() { close(l.stop) })
}

// Release ends the lease and frees the lock. The lease's context is
// cancelled first, so work under it stops before the lock is free. If the
// lease had been lost already, Release still tries to free the lock and
// returns the loss (Err). A second Release returns nil.
func (l *Lease) Release(ctx context.Context) error {
	l.releaseMu.Lock()
	defer l.releaseMu.Unlock()
	if l.released {
		return nil
	}
	l.released = true
	lost := l.Err()
	l.stopWatch()
	<-l.stopped
	l.lose(ErrReleased)
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
// TTLMillis of 0, which means DefaultTTL as it does for Acquire. It is for
// tools that keep the grant themselves, as the benchmark does.
func (c *Client) AcquireRaw(ctx context.Context, name string, req wire.AcquireRequest) (wire.Grant, error) {
	if req.RequestID == "" {
		req.RequestID = newRequestID()
	}
	// The wire struct cannot say "no TTL given" but by 0, which the server
	// refuses as an explicit TTL of 0 (invalid_ttl): send the default, as
	// Acquire does without a TTL option.
	if req.TTLMillis == 0 {
		req.TTLMillis = wire.DefaultTTL.Milliseconds()
	}
	var g wire.Grant
	r := &transport.Request{Path: lockPath(name, "acquire"), Extra: time.Duration(req.WaitMs) * time.Millisecond}
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
