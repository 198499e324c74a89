package chaos

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/fencer-io/fencer/api/client"
	"github.com/fencer-io/fencer/api/wire"
	"github.com/fencer-io/fencer/test/chaos/harness"
	"github.com/fencer-io/fencer/test/chaos/history"
)

// watcher follows GET /v1/events through a whole run, as a user's watcher
// would: through every member's address, resuming with Last-Event-ID when
// one goes away, and re-listing when the members no longer keep what it
// missed (a gap it records). What it saw is checked against the clients'
// history (checker.WatchedGrants).
type watcher struct {
	c      *client.Client
	cancel context.CancelFunc
	done   chan struct{}

	mu    sync.Mutex
	w     history.Watch
	last  uint64 // index of the last event received
	fails int    // watches that ended in an error other than a gap
}

// watchEndLock is the lock whose grant marks the end of the watch: the
// watcher stops once it has seen it, and every earlier entry with it.
const watchEndLock = "chaos-watch-end"

func startWatcher(ctx context.Context, cl *harness.Cluster) (*watcher, error) {
	c, err := client.New(cl.HTTPAddrs(), client.WithTimeout(2*time.Second))
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	w := &watcher{c: c, cancel: cancel, done: make(chan struct{})}
	go w.run(ctx)
	return w, nil
}

func (w *watcher) run(ctx context.Context) {
	defer close(w.done)
	since := uint64(0)
	for ctx.Err() == nil {
		for ev, err := range w.c.Watch(ctx, "", since) {
			if err != nil {
				since = w.failed(ctx, err)
				break
			}
			w.add(ev)
			since = ev.Index
		}
	}
}

func (w *watcher) add(ev wire.Event) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.last = ev.Index
	if ev.Type == wire.EventAcquired || ev.Type == wire.EventHandedOff {
		w.w.Grants = append(w.w.Grants, history.WatchedGrant{Index: ev.Index, Type: ev.Type, Lock: ev.Lock, Holder: ev.Holder, Token: ev.Token, Session: ev.Session})
	}
	if sessionChecked[ev.Type] {
		w.w.Events = append(w.w.Events, history.WatchedEvent{Index: ev.Index, Type: ev.Type, Name: cmp.Or(ev.Lock, ev.Semaphore), Key: ev.Key,
			Token: ev.Token, PrevToken: ev.PrevToken, Reason: ev.Reason, Session: ev.Session})
	}
}

// sessionChecked are the event types the session checks read
// (checker.SessionGrantsEnd and friends): how grants end, how permits are
// granted, sessions, and puts.
var sessionChecked = map[string]bool{
	wire.EventReleased: true, wire.EventExpired: true, wire.EventHandedOff: true, wire.EventVoided: true,
	wire.EventPermitAcquired: true, wire.EventPermitReleased: true, wire.EventPermitExpired: true, wire.EventPermitHandedOff: true,
	wire.EventSessionCreated: true, wire.EventSessionExpired: true, wire.EventSessionClosed: true,
	wire.EventPut: true,
	// Revokes, for checker.RevokedWrites.
	wire.EventRevoked: true,
}

// failed returns where to watch from after err: after a gap when the
// members no longer keep the events after the last one received (from the
// oldest the answering member keeps), else from the last one again.
func (w *watcher) failed(ctx context.Context, err error) uint64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	var apiErr *client.APIError
	if errors.Is(err, client.ErrEventsCompacted) && errors.As(err, &apiErr) && apiErr.Oldest > w.last {
		w.w.Gaps = append(w.w.Gaps, history.WatchGap{After: w.last, Until: apiErr.Oldest})
		w.last = apiErr.Oldest
		return w.last
	}
	if ctx.Err() == nil {
		w.fails++
		select { // every member unreachable for now: a pause, not a spin
		case <-ctx.Done():
		case <-time.After(200 * time.Millisecond):
		}
	}
	return w.last
}

// finish grants watchEndLock once, waits until the watcher has seen that
// grant (and so every entry before it), stops it and returns what it saw.
func (w *watcher) finish(ctx context.Context) (*history.Watch, error) {
	defer w.c.Close()
	defer func() { w.cancel(); <-w.done }()
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	var token uint64
	err := harness.Retry(ctx, func() error {
		l, err := w.c.Acquire(ctx, watchEndLock, client.TTL(time.Minute), client.NoKeepAlive())
		if err != nil {
			return err
		}
		token = l.Token()
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("grant of %s: %w", watchEndLock, err)
	}
	end := token & (1<<40 - 1)
	for {
		w.mu.Lock()
		last := w.last
		w.mu.Unlock()
		if last >= end {
			break
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("the watcher reached index %d, not %d (the end grant's), in a minute", last, end)
		case <-time.After(50 * time.Millisecond):
		}
	}
	w.cancel()
	<-w.done
	w.mu.Lock()
	defer w.mu.Unlock()
	out := w.w
	out.Until = end
	return &out, nil
}
