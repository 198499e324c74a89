package client

import (
	"context"
	"errors"
	"iter"
	"time"

	"github.com/fencer-io/fencer/api/client/internal/transport"
	"github.com/fencer-io/fencer/api/wire"
)

// An election is a lock whose holder publishes a value. The grant's token is
// the leader's term of office: a resource fenced on it refuses a deposed
// leader.

// Campaign blocks until this caller leads the election name (holds the lock
// with value published) or ctx ends, queueing at the leader a minute at a
// time and waiting out a lock-delay. The Lease's Context is cancelled when
// leadership can no longer be trusted; Proclaim changes the value and Resign
// steps down. The options are Acquire's (Wait is the length of each queued
// attempt).
func (c *Client) Campaign(ctx context.Context, name, value string, opts ...AcquireOption) (*Lease, error) {
	return campaign(ctx, c.Acquire, name, value, opts)
}

// campaign is Campaign with acquire: a Client's, or a Session's Lock.
func campaign(ctx context.Context, acquire func(context.Context, string, ...AcquireOption) (*Lease, error), name, value string, opts []AcquireOption) (*Lease, error) {
	opts = append([]AcquireOption{Wait(wire.MaxWait)}, opts...)
	opts = append(opts, Value(value))
	for {
		l, err := acquire(ctx, name, opts...)
		var apiErr *APIError
		switch {
		case err == nil:
			return l, nil
		case ctx.Err() != nil:
			return nil, ctx.Err()
		case errors.Is(err, ErrLockHeld), errors.Is(err, ErrTimeout):
			// The wait ended with somebody else leading: queue again.
		case errors.Is(err, ErrLockDelay) && errors.As(err, &apiErr):
			select {
			case <-ctx.Done():
				return nil, ctx.Err()
			case <-time.After(apiErr.RetryAfter):
			}
		default:
			return nil, err
		}
	}
}

// Proclaim changes the value this leader publishes; the token does not
// change. ErrLeaseLost: this caller no longer leads.
func (l *Lease) Proclaim(ctx context.Context, value string) error {
	var out wire.ValueResponse
	err := l.c.tr.PostJSON(ctx, &transport.Request{Path: kindPath(l.kind, l.grant.Lock, "value")},
		wire.ValueRequest{Lease: l.grant.Lease, Token: l.grant.Token, Value: value}, &out)
	if err == nil {
		l.mu.Lock()
		l.grant.Value = out.Value
		l.mu.Unlock()
	}
	return err
}

// Resign steps down from leading: it releases the lease.
func (l *Lease) Resign(ctx context.Context) error { return l.Release(ctx) }

// ElectionLeader returns the election's current leader: its holder, token
// (the term of office) and value; Held is false when nobody leads. (Leader
// is taken: it names the cluster's leader node.)
func (c *Client) ElectionLeader(ctx context.Context, name string) (wire.LockStatus, error) {
	return c.Lock(ctx, name)
}

// Leadership is one state of an election seen by Observe: who leads, with
// which term (token) and value.
type Leadership struct {
	Holder string
	Token  uint64
	Value  string
}

// Observe yields the election's leader now (if any) and then each time the
// leader or its value changes, in token order, built on the events stream
// (list, then watch from the list's index: no gap, no duplicate). It ends as
// Watch does.
func (c *Client) Observe(ctx context.Context, name string) iter.Seq2[Leadership, error] {
	return func(yield func(Leadership, error) bool) {
		locks, index, err := c.LocksAt(ctx)
		if err != nil {
			yield(Leadership{}, err)
			return
		}
		// A value_set that changes nothing (a Proclaim retried after a lost
		// answer applies twice) is no change to report.
		var last Leadership
		next := func(l Leadership) bool {
			if l == last {
				return true
			}
			last = l
			return yield(l, nil)
		}
		for _, st := range locks {
			if st.Lock == name && st.Held && !next(Leadership{Holder: st.Holder, Token: st.Token, Value: st.Value}) {
				return
			}
		}
		for ev, err := range c.Watch(ctx, name, index) {
			if err != nil {
				yield(Leadership{}, err)
				return
			}
			if ev.Lock != name {
				continue // another lock with name as a prefix
			}
			switch ev.Type {
			case wire.EventAcquired, wire.EventHandedOff, wire.EventValueSet:
				if !next(Leadership{Holder: ev.Holder, Token: ev.Token, Value: ev.Value}) {
					return
				}
			}
		}
	}
}
