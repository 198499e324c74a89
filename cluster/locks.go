package cluster

import (
	"container/list"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fencer-io/fencer/api/wire"
	"github.com/fencer-io/fencer/fsm"
)

// AcquireRequest asks for a lock.
type AcquireRequest struct {
	Lock      string
	Holder    string
	TTL       time.Duration
	Wait      time.Duration // how long to queue if the lock is held
	RequestID string        // makes retries idempotent; generated when empty
}

// Grant is a lock held under a lease.
type Grant struct {
	fsm.Lock
	// Existing is true when the request id had already been granted.
	Existing bool
}

// lockTable holds, on the leader, each lock's proposal mutex and FIFO queue
// of waiters. Proposals that change one lock are serialized by its slot, so
// the leader's FSM view of that lock is exact while the slot is held.
type lockTable struct {
	mu     sync.Mutex
	slots  map[string]*slot
	queued atomic.Int64 // waiters across all slots
}

type slot struct {
	queued  *atomic.Int64 // the table's count of waiters
	mu      sync.Mutex    // serializes proposals for this lock
	refs    int           // guarded by lockTable.mu
	waiters list.List     // of *waiter, guarded by mu
}

type waiter struct {
	cmd    *fsm.Acquire
	result chan waitResult // buffered: a grant is never blocked on delivery
	elem   *list.Element
	taken  bool // popped by a proposal; the result will arrive
}

type waitResult struct {
	grant fsm.Lock
	err   error
}

func newLockTable() *lockTable { return &lockTable{slots: map[string]*slot{}} }

func (t *lockTable) get(name string) *slot {
	t.mu.Lock()
	defer t.mu.Unlock()
	s, ok := t.slots[name]
	if !ok {
		s = &slot{queued: &t.queued}
		t.slots[name] = s
	}
	s.refs++
	return s
}

func (t *lockTable) put(name string, s *slot) {
	t.mu.Lock()
	defer t.mu.Unlock()
	s.refs--
	if s.refs == 0 {
		delete(t.slots, name)
	}
}

// waiting counts queued callers across all locks.
func (t *lockTable) waiting() int {
	t.mu.Lock()
	slots := make([]*slot, 0, len(t.slots))
	for _, s := range t.slots {
		slots = append(slots, s)
	}
	t.mu.Unlock()
	total := 0
	for _, s := range slots {
		s.mu.Lock()
		total += s.waiters.Len()
		s.mu.Unlock()
	}
	return total
}

// failAll answers every waiter with err; used when leadership is lost.
func (t *lockTable) failAll(err error) {
	t.mu.Lock()
	slots := make([]*slot, 0, len(t.slots))
	for _, s := range t.slots {
		slots = append(slots, s)
	}
	t.mu.Unlock()
	for _, s := range slots {
		s.mu.Lock()
		for e := s.waiters.Front(); e != nil; e = s.waiters.Front() {
			w := s.pop()
			w.result <- waitResult{err: err}
		}
		s.mu.Unlock()
	}
}

func (s *slot) pop() *waiter {
	e := s.waiters.Front()
	if e == nil {
		return nil
	}
	w := s.waiters.Remove(e).(*waiter)
	w.taken = true
	s.queued.Add(-1)
	return w
}

func (s *slot) pushFront(w *waiter) {
	w.taken = false
	w.elem = s.waiters.PushFront(w)
	s.queued.Add(1)
}

func (s *slot) pushBack(w *waiter) {
	w.elem = s.waiters.PushBack(w)
	s.queued.Add(1)
}

// remove takes a waiter that gave up out of the queue.
func (s *slot) remove(w *waiter) {
	s.waiters.Remove(w.elem)
	s.queued.Add(-1)
}

// newSecret draws wire.LeaseSecretLen random hex characters: request ids,
// incarnations, cluster ids. A grant's secret is newLeaseSecret's.
func newSecret() string {
	var b [wire.LeaseSecretLen / 2]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err) // crypto/rand does not fail on supported platforms
	}
	return hex.EncodeToString(b[:])
}

// newLeaseSecret returns the secret of a new grant of lock name, also
// wire.LeaseSecretLen hex characters (fsm/secret.go; tested).
func newLeaseSecret(name string) string {
	var random [12]byte
	if _, err := rand.Read(random[:]); err != nil {
		panic(err) // crypto/rand does not fail on supported platforms
	}
	return fsm.NewSecret(name, random)
}

// Acquire grants the lock, queueing for up to req.Wait if it is held. The
// token is the log index of the entry that granted it.
func (n *Node) Acquire(ctx context.Context, req AcquireRequest) (Grant, error) {
	if err := n.awaitLeader(ctx); err != nil {
		return Grant{}, err
	}
	if req.RequestID == "" {
		req.RequestID = newSecret()
	}
	cmd := &fsm.Acquire{
		Lock:      req.Lock,
		Holder:    req.Holder,
		Lease:     newLeaseSecret(req.Lock),
		TTLMillis: req.TTL.Milliseconds(),
		RequestID: req.RequestID,
		NowMillis: time.Now().UnixMilli(),
	}
	s := n.locks.get(req.Lock)
	defer n.locks.put(req.Lock, s)

	s.mu.Lock()
	cur, held := n.fsm.Lock(req.Lock)
	retry := n.fsm.RequestGranted(req.Lock, req.Holder, req.RequestID)
	queue := req.Wait > 0 && !retry && (held || s.waiters.Len() > 0)
	if held && !retry && req.Wait <= 0 {
		// Refuse without writing the log. Under the slot, this leader's view
		// of the lock is exact; a quorum round proves it still leads.
		err := translate(n.raft.VerifyLeader().Error())
		s.mu.Unlock()
		if err != nil {
			return Grant{}, err
		}
		return Grant{}, &fsm.HeldError{Lock: req.Lock, Holder: cur.Holder, Token: cur.Token}
	}
	if !retry && !held {
		if total, mine := n.fsm.LockCount(req.Holder); total >= n.cfg.MaxLocks || mine >= n.cfg.MaxLocksPerHolder {
			s.mu.Unlock()
			return Grant{}, fmt.Errorf("%w: %d held in all, %d by %q (limits %d and %d)", ErrTooManyLocks,
				total, mine, req.Holder, n.cfg.MaxLocks, n.cfg.MaxLocksPerHolder)
		}
	}
	if !queue {
		grant, err := n.grant(cmd)
		s.mu.Unlock()
		return grant, err
	}
	if s.waiters.Len() >= n.cfg.MaxWaitersPerLock || n.locks.queued.Load() >= int64(n.cfg.MaxWaiters) {
		s.mu.Unlock()
		return Grant{}, fmt.Errorf("%w: lock %q has %d waiters, %d in all (limits %d and %d)", ErrTooManyWaiters,
			req.Lock, s.waiters.Len(), n.locks.queued.Load(), n.cfg.MaxWaitersPerLock, n.cfg.MaxWaiters)
	}
	w := &waiter{cmd: cmd, result: make(chan waitResult, 1)}
	s.pushBack(w)
	if !held {
		n.serveWaiters(s, req.Lock)
	}
	s.mu.Unlock()
	return n.wait(ctx, s, w, req)
}

func (n *Node) grant(cmd *fsm.Acquire) (Grant, error) {
	res, err := n.apply(cmd)
	if err != nil {
		return Grant{}, err
	}
	r := res.(*fsm.AcquireResult)
	n.leases.Track(r.Grant.Name, r.Grant.Token, time.Duration(r.Grant.TTLMillis)*time.Millisecond)
	if !r.Existing {
		n.metrics.grants.Inc()
	}
	return Grant{Lock: r.Grant, Existing: r.Existing}, nil
}

func (n *Node) wait(ctx context.Context, s *slot, w *waiter, req AcquireRequest) (Grant, error) {
	timer := time.NewTimer(req.Wait)
	defer timer.Stop()
	select {
	case r := <-w.result:
		return Grant{Lock: r.grant}, r.err
	case <-timer.C:
	case <-ctx.Done():
	case <-n.stop:
	}
	s.mu.Lock()
	if w.taken {
		// A proposal popped this waiter; its result is on the way and,
		// being a grant, must not be dropped.
		s.mu.Unlock()
		r := <-w.result
		return Grant{Lock: r.grant}, r.err
	}
	s.remove(w)
	s.mu.Unlock()
	if err := ctx.Err(); err != nil {
		return Grant{}, err
	}
	cur, held := n.fsm.Lock(req.Lock)
	if !held {
		return Grant{}, &fsm.HeldError{Lock: req.Lock}
	}
	return Grant{}, &fsm.HeldError{Lock: req.Lock, Holder: cur.Holder, Token: cur.Token}
}

// serveWaiters grants a free lock to queued waiters, head first, until one of
// them gets it. Called with s.mu held.
func (n *Node) serveWaiters(s *slot, name string) {
	for {
		if _, held := n.fsm.Lock(name); held {
			return
		}
		w := s.pop()
		if w == nil {
			return
		}
		grant, err := n.grant(w.cmd)
		w.result <- waitResult{grant: grant.Lock, err: err}
		if err == nil || errors.Is(err, ErrNotLeader) || errors.Is(err, ErrNoLeader) || errors.Is(err, ErrOutcomeUnknown) {
			return
		}
	}
}

// Renew confirms leadership with a quorum round and extends the lease's
// deadline on the leader. It writes nothing to the log.
func (n *Node) Renew(ctx context.Context, name string, token uint64, lease string) (fsm.Lock, error) {
	if err := n.awaitLeader(ctx); err != nil {
		return fsm.Lock{}, err
	}
	if err := n.raft.VerifyLeader().Error(); err != nil {
		return fsm.Lock{}, translate(err)
	}
	cur, held := n.fsm.Lock(name)
	if !held || cur.Token != token || !fsm.LeaseEqual(cur.Lease, lease) {
		return fsm.Lock{}, fsm.LeaseRefused(name, cur.Token, token, lease)
	}
	if !n.leases.Renew(name, token) {
		return fsm.Lock{}, fmt.Errorf("%w: lock %q's grant with token %d: its lease expired", fsm.ErrLeaseLost, name, token)
	}
	n.metrics.renewals.Inc()
	return cur, nil
}

// Release frees the lock and hands it to the head waiter in the same entry.
func (n *Node) Release(ctx context.Context, name string, token uint64, lease string) error {
	if err := n.awaitLeader(ctx); err != nil {
		return err
	}
	err := n.free(name, token, func(next *fsm.Acquire) fsm.Command {
		return &fsm.Release{Lock: name, Token: token, Lease: lease, Next: next}
	})
	if err == nil {
		n.metrics.releases.Inc()
	}
	return err
}

// expire is called by the lease timers when a deadline passes.
func (n *Node) expire(name string, token uint64) {
	if n.awaitLeader(context.Background()) != nil {
		return
	}
	err := n.free(name, token, func(next *fsm.Acquire) fsm.Command {
		return &fsm.Expire{Lock: name, Token: token, Next: next}
	})
	switch {
	case err == nil:
		n.metrics.expirations.Inc()
		n.log.Debug("lease expired", "lock", name, "token", token)
	case errors.Is(err, fsm.ErrLeaseLost):
		// Released or superseded meanwhile: nothing to do.
	default:
		n.log.Warn("expire proposal failed; will retry", "lock", name, "token", token, "err", err)
		n.leases.Retry(name, token, 100*time.Millisecond)
	}
}

// free proposes the command built by mk (a Release or Expire), offering the
// lock to the head waiter in the same entry.
func (n *Node) free(name string, token uint64, mk func(next *fsm.Acquire) fsm.Command) error {
	s := n.locks.get(name)
	defer n.locks.put(name, s)
	s.mu.Lock()
	defer s.mu.Unlock()
	w := s.pop()
	var next *fsm.Acquire
	if w != nil {
		next = w.cmd
		next.NowMillis = time.Now().UnixMilli()
	}
	res, err := n.apply(mk(next))
	if err != nil {
		if w != nil {
			s.pushFront(w)
		}
		return err
	}
	r := res.(*fsm.ReleaseResult)
	n.leases.Forget(name, token)
	if w != nil {
		switch {
		case r.Next != nil:
			n.leases.Track(name, r.Next.Token, time.Duration(r.Next.TTLMillis)*time.Millisecond)
			n.metrics.grants.Inc()
			w.result <- waitResult{grant: *r.Next}
		default:
			w.result <- waitResult{err: r.NextErr}
		}
	}
	n.serveWaiters(s, name)
	return nil
}

// LockStatus is a lock as reported to clients (never the lease secret).
type LockStatus struct {
	fsm.Lock
	Held bool
	// Remaining is the leader's view of the lease's time left; Known is
	// false on a stale read from a follower.
	Remaining time.Duration
	Known     bool
}

// Lock returns a lock's state; linearizable unless stale.
func (n *Node) Lock(ctx context.Context, name string, stale bool) (LockStatus, error) {
	if !stale {
		if err := n.linearizable(ctx); err != nil {
			return LockStatus{}, err
		}
	}
	cur, held := n.fsm.Lock(name)
	st := LockStatus{Lock: cur, Held: held}
	st.Name = name
	if held {
		st.Remaining, st.Known = n.leases.Remaining(name, cur.Token)
	}
	return st, nil
}

// Locks returns every held lock; linearizable unless stale.
func (n *Node) Locks(ctx context.Context, stale bool) ([]LockStatus, error) {
	if !stale {
		if err := n.linearizable(ctx); err != nil {
			return nil, err
		}
	}
	// EachLock, not Locks: no intermediate copy of every lock.
	out := make([]LockStatus, 0, n.fsm.Counts().Locks)
	n.fsm.EachLock(func(l fsm.Lock) {
		st := LockStatus{Lock: l, Held: true}
		st.Remaining, st.Known = n.leases.Remaining(l.Name, l.Token)
		out = append(out, st)
	})
	return out, nil
}

// Check reports whether token is the lock's live grant, and the current
// token (0 when the lock is free).
func (n *Node) Check(ctx context.Context, name string, token uint64, stale bool) (bool, uint64, error) {
	st, err := n.Lock(ctx, name, stale)
	if err != nil {
		return false, 0, err
	}
	if !st.Held {
		return false, 0, nil
	}
	return st.Token == token, st.Token, nil
}

// Put stores a fenced value.
func (n *Node) Put(ctx context.Context, key string, value []byte, token uint64, lock string) (uint64, error) {
	if err := n.awaitLeader(ctx); err != nil {
		return 0, err
	}
	res, err := n.apply(&fsm.Put{Key: key, Value: value, Token: token, Lock: lock})
	if err != nil {
		return 0, err
	}
	return res.(*fsm.PutResult).Token, nil
}

// Get reads a fenced key; linearizable unless stale.
func (n *Node) Get(ctx context.Context, key string, stale bool) (fsm.FencedKey, bool, error) {
	if !stale {
		if err := n.linearizable(ctx); err != nil {
			return fsm.FencedKey{}, false, err
		}
	}
	k, ok := n.fsm.Key(key)
	return k, ok, nil
}

// Waiters returns how many callers are queued for a lock on this node.
func (n *Node) Waiters(name string) int {
	s := n.locks.get(name)
	defer n.locks.put(name, s)
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.waiters.Len()
}
