package client

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/fencer-io/fencer/api/client/internal/transport"
	"github.com/fencer-io/fencer/api/wire"
)

// MultiLock is a held multi-lock: several locks granted at once, all or
// none, with one fencing token and one lease for all of them (POST
// /v1/locks/acquire). Each name is held like a lock (Fencing-Lock writes
// under any of them pass with Token); its one lease is kept alive in the
// background as a Lease's is, and Release frees every name at once.
type MultiLock struct {
	c     *Client
	grant wire.MultiGrant
	ttl   time.Duration
	k     *keeper

	releaseMu sync.Mutex
	released  bool
}

// MultiLock takes every lock of names or none (ErrLockHeld, APIError.Lock
// naming the first held one; ErrLockDelay for one in its lock-delay), and
// keeps the one lease alive until Release or loss. With Wait it queues in
// every name's FIFO for up to that long and is granted all names at once
// when it heads each and all are free; two multi-locks waiting on the same
// names never deadlock. Mode(wire.ModeShared) takes every name in shared
// mode, with the one token (ErrUpgradeRequired while a member runs an
// older build). LockDelay and Value are refused (ErrInvalid). ctx
// bounds only the acquire. Every attempt carries one request id, so a
// retry after a lost answer gets the first grant back.
func (c *Client) MultiLock(ctx context.Context, names []string, opts ...AcquireOption) (*MultiLock, error) {
	o, err := newAcquireOptions(opts)
	if err != nil {
		return nil, err
	}
	if o.lockDelay != 0 || o.value != "" {
		return nil, fmt.Errorf("%w: a multi-lock takes no lock-delay or value", ErrInvalid)
	}
	body := wire.MultiAcquireRequest{Names: names, Holder: o.holder, TTLMillis: o.ttl.Milliseconds(), WaitMs: o.wait.Milliseconds(),
		Mode: o.wireMode(), RequestID: newRequestID()}
	r := &transport.Request{Path: "/v1/locks/acquire", Extra: o.wait}
	var g wire.MultiGrant
	if err := c.tr.PostJSON(ctx, r, body, &g); err != nil {
		return nil, err
	}
	if err := checkMultiGrant(g, body); err != nil {
		return nil, err
	}
	start := r.Sent
	if g.Existing {
		start = r.FirstSent
	}
	m := &MultiLock{c: c, grant: g, ttl: time.Duration(g.TTLMillis) * time.Millisecond}
	m.k = newKeeper(m.ttl, start, c.log, "fencer multi-lock lost", []any{"locks", strings.Join(g.Names, ","), "token", g.Token}, m.sendRenewal)
	if received := time.Now(); received.Sub(start) > m.ttl/3 {
		// Slow retries: start is a stale bound; renew once (as Acquire).
		if err := m.k.confirmFirst(ctx, received); err != nil {
			m.k.cancel(err)
			_ = m.c.releaseMulti(context.WithoutCancel(ctx), g.Token, g.Lease)
			return nil, fmt.Errorf("multi-lock %v granted with token %d, but the grant could not be confirmed: %w", g.Names, g.Token, err)
		}
	}
	go m.k.watch(o.keepAlive)
	return m, nil
}

// checkMultiGrant refuses an answer that is not the grant asked for: the
// client could not tell what it holds.
func checkMultiGrant(g wire.MultiGrant, asked wire.MultiAcquireRequest) error {
	what := fmt.Sprintf("multi-lock %v", asked.Names)
	switch {
	case !slices.Equal(g.Names, asked.Names):
		return badAnswer(what, "the answer names locks %v", g.Names)
	case g.Mode != asked.Mode:
		return badAnswer(what, "the answer is a grant in mode %q, not %q as asked", g.Mode, asked.Mode)
	case g.Holder != asked.Holder:
		return badAnswer(what, "the answer names holder %q, not %q as asked", g.Holder, asked.Holder)
	case g.Token == 0:
		return badAnswer(what, "the answer has no token")
	case !leaseSecret(g.Lease):
		return badAnswer(what, "lease %q is not %d hexadecimal digits", g.Lease, wire.LeaseSecretLen)
	case g.TTLMillis <= 0 || g.TTLMillis > asked.TTLMillis:
		return badAnswer(what, "ttl_ms %d is not within the %d asked for", g.TTLMillis, asked.TTLMillis)
	case g.RequestID != "" && g.RequestID != asked.RequestID:
		return badAnswer(what, "the answer is for request %q, not %q", g.RequestID, asked.RequestID)
	}
	return nil
}

// Token is the fencing token of every name: pass it with each write.
func (m *MultiLock) Token() uint64 { return m.grant.Token }

// Names are the locks held, in the order asked.
func (m *MultiLock) Names() []string { return slices.Clone(m.grant.Names) }

// Shared reports whether every name is held in shared mode.
func (m *MultiLock) Shared() bool { return m.grant.Mode == wire.ModeShared }

// Holder is the holder name the locks were granted to.
func (m *MultiLock) Holder() string { return m.grant.Holder }

// TTL is the one lease's time to live as granted.
func (m *MultiLock) TTL() time.Duration { return m.ttl }

// Secret is the lease secret that renew and release need.
func (m *MultiLock) Secret() string { return m.grant.Lease }

// Grant is the server's answer to the acquire.
func (m *MultiLock) Grant() wire.MultiGrant { return m.grant }

// Deadline is the local deadline, as a Lease's.
func (m *MultiLock) Deadline() time.Time { return m.k.deadline() }

// Done is closed when the multi-lock is lost or released.
func (m *MultiLock) Done() <-chan struct{} {
	m.k.checkDeadline()
	return m.k.ctx.Done()
}

// Context is cancelled when the multi-lock is lost or released; its cause
// is Err.
func (m *MultiLock) Context() context.Context {
	m.k.checkDeadline()
	return m.k.ctx
}

// Err is nil while the multi-lock is held; then ErrReleased, or why it was
// lost (ErrLeaseLost, ErrLeaseExpired), as a Lease's.
func (m *MultiLock) Err() error {
	m.k.checkDeadline()
	if m.k.ctx.Err() == nil {
		return nil
	}
	return context.Cause(m.k.ctx)
}

// Renew renews the one lease now; a refusal ends the multi-lock.
func (m *MultiLock) Renew(ctx context.Context) error {
	if err := m.Err(); err != nil {
		return err
	}
	return m.k.renew(ctx, false)
}

func (m *MultiLock) sendRenewal(ctx context.Context) (time.Time, error) {
	r := &transport.Request{Path: "/v1/locks/renew", AttemptTimeout: max(m.ttl/3, 100*time.Millisecond), UntilDone: true}
	var out wire.MultiRenewResponse
	if err := m.c.tr.PostJSON(ctx, r, wire.LeaseRequest{Lease: m.grant.Lease, Token: m.grant.Token}, &out); err != nil {
		return r.Sent, err
	}
	what := fmt.Sprintf("renew multi-lock %v token %d", m.grant.Names, m.grant.Token)
	switch {
	case out.Token != m.grant.Token:
		return r.Sent, badAnswer(what, "the answer names token %d", out.Token)
	case out.TTLMillis != m.grant.TTLMillis:
		return r.Sent, badAnswer(what, "ttl_ms %d is not the grant's %d", out.TTLMillis, m.grant.TTLMillis)
	}
	return r.Sent, nil
}

// Release ends the multi-lock and frees every name, in one entry. Its
// context is cancelled first, so work under it stops before the locks are
// free. A lost multi-lock is still released, and the loss returned; a
// second Release returns nil.
func (m *MultiLock) Release(ctx context.Context) error {
	m.releaseMu.Lock()
	defer m.releaseMu.Unlock()
	if m.released {
		return nil
	}
	m.released = true
	lost := m.Err()
	m.k.stopWatch()
	m.k.cancel(ErrReleased)
	err := m.c.releaseMulti(ctx, m.grant.Token, m.grant.Lease)
	if lost != nil {
		return lost
	}
	return err
}

// releaseMulti releases multi-grant token; a retry that finds it ended,
// after an attempt whose outcome is unknown, is its own release.
func (c *Client) releaseMulti(ctx context.Context, token uint64, lease string) error {
	r := &transport.Request{Path: "/v1/locks/release"}
	err := c.tr.PostJSON(ctx, r, wire.LeaseRequest{Lease: lease, Token: token}, &wire.MultiReleaseResponse{})
	if err != nil && r.Uncertain && errors.Is(err, ErrLeaseLost) {
		return nil
	}
	return err
}

// RenewMultiRaw renews multi-grant token's one lease once, as MultiLock's
// keep-alive does, for tools that keep the grant themselves (the CLI).
func (c *Client) RenewMultiRaw(ctx context.Context, token uint64, lease string) (wire.MultiRenewResponse, error) {
	var out wire.MultiRenewResponse
	err := c.tr.PostJSON(ctx, &transport.Request{Path: "/v1/locks/renew"}, wire.LeaseRequest{Lease: lease, Token: token}, &out)
	return out, err
}

// ReleaseMultiRaw releases multi-grant token, every name in one entry.
func (c *Client) ReleaseMultiRaw(ctx context.Context, token uint64, lease string) error {
	return c.releaseMulti(ctx, token, lease)
}
