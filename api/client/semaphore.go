package client

import (
	"context"
	"net/url"
	"strconv"
	"time"

	"github.com/fencer-io/fencer/api/client/internal/transport"
	"github.com/fencer-io/fencer/api/wire"
)

// AcquirePermit takes one of the limit permits of the semaphore name,
// waiting up to Wait while all are held, and keeps its lease alive as
// Acquire does a lock's: the Lease's Token is the permit's own fencing
// token, Done and Context fire when the permit can no longer be trusted,
// and Name is the semaphore. limit must equal the semaphore's while any
// permit is held (ErrLimitMismatch); when all are held the error is
// ErrSemaphoreFull, with APIError.Held. The options are Acquire's
// (LockDelay delays the permit's slot if the permit expires).
func (c *Client) AcquirePermit(ctx context.Context, name string, limit int, opts ...AcquireOption) (*Lease, error) {
	o, err := newAcquireOptions(opts)
	if err != nil {
		return nil, err
	}
	if err := checkLimit(limit); err != nil {
		return nil, err
	}
	body := wire.SemAcquireRequest{
		Holder:    o.holder,
		Limit:     limit,
		TTLMillis: o.ttl.Milliseconds(),
		WaitMs:    o.wait.Milliseconds(),
		RequestID: newRequestID(),

		LockDelayMillis: o.lockDelay.Milliseconds(),
	}
	r := &transport.Request{Path: kindPath("semaphores", name, "acquire"), Extra: o.wait}
	var p wire.PermitGrant
	if err := c.tr.PostJSON(ctx, r, body, &p); err != nil {
		return nil, err
	}
	g := permitGrant(p)
	if err := checkGrant(g, "semaphores", name, body.Holder, body.TTLMillis, body.RequestID); err != nil {
		return nil, err
	}
	if err := checkPermit(p, limit); err != nil {
		return nil, err
	}
	l, err := c.hold(ctx, g, "semaphores", r, o.keepAlive)
	if l != nil {
		l.held = p.Held
	}
	return l, err
}

func checkLimit(limit int) error {
	if limit < 1 || limit > wire.MaxSemaphoreLimit {
		return refuse(wire.CodeInvalidLimit, "limit %d: want 1 to %d", limit, wire.MaxSemaphoreLimit)
	}
	return nil
}

// permitGrant is a permit as the grant a Lease holds: Lock is the
// semaphore.
func permitGrant(p wire.PermitGrant) wire.Grant {
	return wire.Grant{Lock: p.Semaphore, Holder: p.Holder, Token: p.Token, Lease: p.Lease, TTLMillis: p.TTLMillis,
		RequestID: p.RequestID, Existing: p.Existing, LockDelayMillis: p.LockDelayMillis, Session: p.Session}
}

// Held is, for a semaphore permit, the number of permits held once it was
// granted (this one included); 0 for a lock.
func (l *Lease) Held() int { return l.held }

// Semaphore returns a semaphore's limit, holders and waiters.
func (c *Client) Semaphore(ctx context.Context, name string) (wire.SemaphoreStatus, error) {
	var st wire.SemaphoreStatus
	err := c.tr.GetJSON(ctx, kindPath("semaphores", name, ""), nil, &st)
	return st, err
}

// Semaphores lists the semaphores with a permit held.
func (c *Client) Semaphores(ctx context.Context) ([]wire.SemaphoreStatus, error) {
	var out wire.SemaphoreList
	err := c.tr.GetJSON(ctx, "/v1/semaphores", nil, &out)
	return out.Semaphores, err
}

// CheckPermit reports whether permit token of a semaphore is still held.
func (c *Client) CheckPermit(ctx context.Context, name string, token uint64) (bool, error) {
	var out wire.PermitCheckResponse
	q := url.Values{"token": {strconv.FormatUint(token, 10)}}
	err := c.tr.GetJSON(ctx, kindPath("semaphores", name, "check"), q, &out)
	return out.Current, err
}

// RenewPermitRaw renews a permit known only by its token and secret, as the
// command-line client does.
func (c *Client) RenewPermitRaw(ctx context.Context, name string, token uint64, lease string) (wire.SemRenewResponse, error) {
	var out renewAnswer
	if err := c.tr.PostJSON(ctx, &transport.Request{Path: kindPath("semaphores", name, "renew")}, wire.LeaseRequest{Lease: lease, Token: token}, &out); err != nil {
		return wire.SemRenewResponse{}, err
	}
	if err := checkRenewal(out, "semaphores", name, token, 0); err != nil {
		return wire.SemRenewResponse{}, err
	}
	return wire.SemRenewResponse{Semaphore: out.Semaphore, Token: out.Token, TTLMillis: out.TTLMillis}, nil
}

// ReleasePermitRaw releases a permit known only by its token and secret.
func (c *Client) ReleasePermitRaw(ctx context.Context, name string, token uint64, lease string) error {
	return c.releaseKind(ctx, "semaphores", name, token, lease, &struct{}{})
}

// AcquirePermitRaw asks for a permit of the semaphore name as AcquireRaw
// does for a lock's grant: one request id across its attempts, no lease
// kept, req sent as given but for a TTLMillis of 0 (DefaultTTL, or under a
// session no ttl_ms at all).
func (c *Client) AcquirePermitRaw(ctx context.Context, name string, req wire.SemAcquireRequest) (wire.PermitGrant, error) {
	if req.RequestID == "" {
		req.RequestID = newRequestID()
	}
	var p wire.PermitGrant
	r := &transport.Request{Path: kindPath("semaphores", name, "acquire"), Extra: time.Duration(req.WaitMs) * time.Millisecond}
	var check error
	if req.Session != 0 {
		if err := c.tr.PostJSON(ctx, r, sessionSemAcquire{SemAcquireRequest: req, TTLMillis: orNil(req.TTLMillis)}, &p); err != nil {
			return p, err
		}
		check = checkSessionGrant(permitGrant(p), "semaphores", name, req.Holder, req.Session, wire.MaxTTL.Milliseconds(), req.RequestID)
	} else {
		if req.TTLMillis == 0 {
			req.TTLMillis = wire.DefaultTTL.Milliseconds()
		}
		if err := c.tr.PostJSON(ctx, r, req, &p); err != nil {
			return p, err
		}
		check = checkGrant(permitGrant(p), "semaphores", name, req.Holder, req.TTLMillis, req.RequestID)
	}
	if check != nil {
		return p, check
	}
	return p, checkPermit(p, req.Limit)
}
