package client

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	mrand "math/rand/v2"
	"slices"
	"sync"
	"time"
)

// keeper keeps one lease alive: a grant's (Lease) or a session's (Session).
// It owns the local deadline (the send time of the last confirmed renewal
// plus TTL minus Margin), the renewal schedule, and the goroutine that
// enforces both. A grant held under a session has no keeper of its own: it
// lives by its session's, which is the point of a session (one renewal
// keeps every grant under it).
type keeper struct {
	ttl    time.Duration
	margin time.Duration
	// send renews the lease on the server, retrying until an attempt is
	// answered or ctx ends, and returns that attempt's send time.
	send func(ctx context.Context) (time.Time, error)
	log  *slog.Logger
	lost string // the warning logged on a loss
	what []any  // log attributes that name the lease

	ctx    context.Context
	cancel context.CancelCauseFunc

	mu        sync.Mutex
	confirmed time.Time // send time of the last confirmed acquire or renewal
	due       time.Time // when the keep-alive renews next
	lastErr   error     // the last failed renewal, for the loss message

	moved    chan struct{} // a manual renewal moved the deadline
	stop     chan struct{} // closed by stopWatch
	stopOnce sync.Once
	stopped  chan struct{} // closed when the watcher exits
}

func newKeeper(ttl time.Duration, start time.Time, log *slog.Logger, lost string, what []any, send func(context.Context) (time.Time, error)) *keeper {
	k := &keeper{
		ttl:     ttl,
		margin:  Margin(ttl),
		send:    send,
		log:     log,
		lost:    lost,
		what:    what,
		moved:   make(chan struct{}, 1),
		stop:    make(chan struct{}),
		stopped: make(chan struct{}),
	}
	k.ctx, k.cancel = context.WithCancelCause(context.Background())
	k.confirm(start)
	return k
}

func (k *keeper) deadline() time.Time {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.deadlineLocked()
}

func (k *keeper) deadlineLocked() time.Time { return k.confirmed.Add(k.ttl - k.margin) }

// err is nil while the lease is held, else why it is not. It reads the
// clock itself (checkDeadline).
func (k *keeper) err() error {
	k.checkDeadline()
	if k.ctx.Err() == nil {
		return nil
	}
	return context.Cause(k.ctx)
}

// checkDeadline ends the lease if its local deadline has passed, so that a
// process paused past it sees the loss on its first look, before any timer
// has run.
func (k *keeper) checkDeadline() {
	if k.ctx.Err() != nil {
		return
	}
	if now := time.Now(); !now.Before(k.deadline()) {
		k.lose(k.expired(now))
	}
}

func (k *keeper) expired(now time.Time) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	err := fmt.Errorf("%w (last confirmed %v ago, ttl %v, margin %v)", ErrLeaseExpired, now.Sub(k.confirmed).Round(time.Millisecond), k.ttl, k.margin)
	if k.lastErr != nil {
		err = fmt.Errorf("%w; last renewal error: %w", err, k.lastErr)
	}
	return err
}

// lose ends the lease with cause; the first cause wins.
func (k *keeper) lose(cause error) {
	if k.ctx.Err() != nil {
		return
	}
	k.cancel(cause)
	if !errors.Is(cause, ErrReleased) {
		k.log.Warn(k.lost, k.attrs("err", cause)...)
	}
}

// confirm records a renewal sent at sent, moving the deadline.
func (k *keeper) confirm(sent time.Time) {
	k.mu.Lock()
	if k.ctx.Err() == nil && sent.After(k.confirmed) {
		k.confirmed = sent
		k.lastErr = nil
		// Renew at about a third of the TTL, ±10%, so that two renewals
		// can fail before the deadline.
		third := k.ttl / 3
		k.due = sent.Add(third - third/10 + mrand.N(third/5+1))
	}
	k.mu.Unlock()
	select {
	case k.moved <- struct{}{}:
	default:
	}
}

// watch enforces the local deadline and, with keepAlive, renews when due.
func (k *keeper) watch(keepAlive bool) {
	defer close(k.stopped)
	t := time.NewTimer(time.Hour)
	defer t.Stop()
	for {
		k.checkDeadline()
		if k.ctx.Err() != nil {
			return
		}
		now := time.Now()
		k.mu.Lock()
		deadline, due := k.deadlineLocked(), k.due
		k.mu.Unlock()
		wake := deadline
		if keepAlive && due.Before(wake) {
			wake = due
		}
		t.Reset(wake.Sub(now))
		select {
		case <-k.stop:
			return
		case <-k.ctx.Done():
			return
		case <-k.moved:
			continue
		case <-t.C:
		}
		if keepAlive && !time.Now().Before(due) {
			k.renew(context.Background(), true)
		}
	}
}

// renew sends one renewal, retrying until it is answered or the local
// deadline passes: by then the lease has been declared lost, and a loss is
// final. A refusal ends the lease; other errors, ErrBadAnswer among them,
// leave it to the local deadline.
func (k *keeper) renew(ctx context.Context, background bool) error {
	ctx, cancel := context.WithDeadline(ctx, k.deadline())
	defer cancel()
	stop := context.AfterFunc(k.ctx, cancel)
	defer stop()
	sent, err := k.send(ctx)
	switch {
	case err == nil:
		k.confirm(sent)
		return nil
	case refused(err):
		k.lose(fmt.Errorf("renewal refused: %w", err))
		return k.err()
	}
	k.mu.Lock()
	k.lastErr = err
	if background {
		// Try again soon, not at once: a renewal that failed without
		// retrying (ErrBadAnswer) would otherwise be resent in a loop
		// until the deadline. The deadline still rules.
		k.due = time.Now().Add(min(k.ttl/10, time.Second))
	}
	k.mu.Unlock()
	if background {
		k.log.Debug("fencer renewal failed", k.attrs("err", err)...)
	}
	if lerr := k.err(); lerr != nil {
		return lerr
	}
	return err
}

// confirmFirst renews a lease that has not been handed out yet, and moves
// its deadline to that renewal. The deadline known so far may have passed
// already, so unlike renew it does not bound the renewal by it: a renewal
// the server accepts proves the lease current whenever it was sent. It
// gives up a TTL after the lease's answer arrived (received), when the
// server, having started the lease before that, has expired it unless a
// new leader restarted it.
func (k *keeper) confirmFirst(ctx context.Context, received time.Time) error {
	ctx, cancel := context.WithDeadline(ctx, received.Add(k.ttl))
	defer cancel()
	sent, err := k.send(ctx)
	if err != nil {
		return err
	}
	k.confirm(sent)
	// Only a renewal whose attempt hung for most of a TTL leaves a
	// deadline in the past.
	return k.err()
}

// stopWatch ends the watcher, and with it the renewals, and waits for it.
func (k *keeper) stopWatch() {
	k.stopOnce.Do(func() { close(k.stop) })
	<-k.stopped
}

// refused reports whether the server answered with a definite no.
func refused(err error) bool {
	var ae *APIError
	return errors.As(err, &ae) && ae.Status >= 400 && ae.Status < 500
}

// attrs are the lease's log attributes followed by more; a copy, since
// the watcher and callers of Renew log at once.
func (k *keeper) attrs(more ...any) []any { return slices.Concat(k.what, more) }
