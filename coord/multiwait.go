package coord

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fencer-io/fencer/coord/internal/timed"
	"github.com/fencer-io/fencer/coord/internal/waitq"
	"github.com/fencer-io/fencer/fsm"
	"github.com/fencer-io/fencer/fsm/entry"
)

// A waiting multi-acquire (DESIGN.md, "Multi-locks", "Waiting"): one
// waitq.Waiter in each of its names' FIFOs, all pushed under every name's
// queue (held in holdNames' order), so two multi-waiters are in the same
// order in every FIFO they share and can never wait on each other. A name
// whose head it is stays kept for it (waitq's Reserved): freeing entries
// do not offer it to anybody, serving stops at it and acquires queue
// behind it. It is granted by the first proposal that holds all its
// queues and finds it at the head of each with room: one MultiAcquire,
// one token, proposed as soon as the entry that freed the last of its
// names lets that name's queue go.

// lockHold is one lock name's queue held by a multi-lock's proposal.
type lockHold = *heldName[*entry.Acquire, fsm.AcquireResult]

// holdMulti holds the queues of lock names, in holdNames' order (for lock
// names: by name), and returns them in that order with the function that
// lets them go (serving the waiters of those an applied entry freed).
func (s *Service) holdMulti(names []string) ([]lockHold, func()) {
	sorted := slices.Sorted(slices.Values(names))
	holds := make([]lockHold, len(sorted))
	set := &holdSet{held: len(sorted)}
	for i, n := range sorted {
		holds[i] = s.locks.hold(n)
		holds[i].set = set
	}
	return holds, func() {
		for _, h := range slices.Backward(holds) {
			h.Release()
		}
	}
}

// multiWaiter is a multi-acquire queued for its names: a waitq.Group.
type multiWaiter struct {
	s   *Service
	cmd *entry.MultiAcquire
	// members are its waiters, one per name, in holdMulti's order.
	members []*waitq.Waiter[*entry.Acquire, fsm.AcquireResult]
	result  chan multiAnswer // buffered: answered once (once)
	once    sync.Once
	// kicked says a grant attempt is on its way (Ready).
	kicked atomic.Bool
	// taken (popped from every queue by its grant) and left (it gave up)
	// are guarded by its queues, all held.
	taken, left bool
}

type multiAnswer struct {
	r   fsm.MultiResult
	err error
}

func (m *multiWaiter) answer(r fsm.MultiResult, err error) {
	m.once.Do(func() { m.result <- multiAnswer{r, err} })
}

// Fail answers it when leadership is lost (every queue it is in calls it;
// the first answer stands).
func (m *multiWaiter) Fail(err error) { m.answer(fsm.MultiResult{}, err) }

// Ready asks for a grant attempt, unless one is on its way. The caller
// holds one of its queues, and the attempt must hold all of them in
// order, so it is made once the caller has let every queue it holds go
// (holdSet), by the same goroutine: not beside the caller's own next
// proposals, so that entries come in one order (the simulation replays a
// seed entry for entry).
func (m *multiWaiter) Ready() {
	if m.kicked.CompareAndSwap(false, true) {
		m.s.ready.add(m)
	}
}

// readyMultis are the multi-waiters Ready asked to try, in the order
// asked.
type readyMultis struct {
	mu   sync.Mutex
	list []*multiWaiter
}

func (r *readyMultis) add(m *multiWaiter) {
	r.mu.Lock()
	r.list = append(r.list, m)
	r.mu.Unlock()
}

// try makes the grant attempts asked for; called holding no queue.
func (r *readyMultis) try(s *Service) {
	for {
		r.mu.Lock()
		if len(r.list) == 0 {
			r.mu.Unlock()
			return
		}
		m := r.list[0]
		r.list = r.list[1:]
		r.mu.Unlock()
		s.grantQueuedMulti(m)
	}
}

// holdSet counts the queues one proposal holds together (holdNames,
// holdMulti; one for a single hold): the last let go makes the grant
// attempts its serving asked for.
type holdSet struct{ held int }

// probe is what the room of name is asked about for a multi-acquire: an
// acquire of it in the same mode by the same holder, never proposed.
func probe(name string, c *entry.MultiAcquire) *entry.Acquire {
	return &entry.Acquire{Lock: name, Holder: c.Holder, Mode: c.Mode}
}

// multiNow answers a multi-acquire without a wait, holding every name's
// queue (holds): refused at the first name (in the order asked) that is
// held, in its lock-delay or kept for a waiter queued before (after a
// quorum round), beyond the limits, or granted.
func (s *Service) multiNow(holds []lockHold, c *entry.MultiAcquire) (fsm.MultiResult, error) {
	if why := s.multiRefusal(holds, c); why != nil {
		return fsm.MultiResult{}, s.refuse(why)
	}
	return s.grantMulti(c)
}

// multiRefusal is why c cannot be granted now (nil: it can), read once
// per name under holds: a retry of a granted request never is.
func (s *Service) multiRefusal(holds []lockHold, c *entry.MultiAcquire) error {
	if s.fsm.MultiRequestGranted(c.Holder, c.RequestID, c.Principal) {
		return nil
	}
	var st fsm.NameState
	for _, n := range c.Names {
		h := holds[slices.IndexFunc(holds, func(h lockHold) bool { return h.name == n })]
		st = s.locks.state(n, c.Holder, "", "")
		// A shared one does not pass the requests queued for a name held
		// in shared mode, as a single shared acquire does not.
		if why := s.locks.p.refusal(st, probe(n, c), false, h.q.Len() > 0); why != nil {
			return why
		}
		if h.q.Reserved() {
			// Free, and kept for a multi-acquire queued first.
			return reservedError("lock", n)
		}
	}
	cfg, more := s.cfg, len(c.Names)
	if st.Total+more > cfg.MaxLocks || st.Mine+more > cfg.MaxLocksPerHolder {
		return fmt.Errorf("%w: %d locks and permits held in all, %d by %q, and %d more asked (limits %d and %d)", ErrTooManyLocks,
			st.Total, st.Mine, c.Holder, more, cfg.MaxLocks, cfg.MaxLocksPerHolder)
	}
	return nil
}

// grantMulti proposes c, stamped with the leader's time, and times the
// grant's one lease. A retry tracks it too, in case the first answer was
// lost before the leader did (as an acquire's).
func (s *Service) grantMulti(c *entry.MultiAcquire) (fsm.MultiResult, error) {
	c.NowMillis = s.nowMillis()
	res, err := s.raft.Apply(c)
	if err != nil {
		return fsm.MultiResult{}, err
	}
	r := res.(*fsm.MultiResult)
	s.timers.Track(timed.MultiKey(r.Grant.Token), r.Grant.Token, millis(r.Grant.TTLMillis))
	if !r.Existing {
		s.metrics.Grants.Inc()
	}
	return *r, nil
}

// queueMulti pushes c's waiter at the tail of every name's FIFO, holding
// them all (holds), within the waiter limits.
func (s *Service) queueMulti(holds []lockHold, c *entry.MultiAcquire) (*multiWaiter, error) {
	for _, h := range holds {
		if err := s.checkWaiters(h.q.Len(), "lock", h.name); err != nil {
			return nil, s.refuse(err)
		}
	}
	m := &multiWaiter{s: s, cmd: c, result: make(chan multiAnswer, 1)}
	for _, h := range holds {
		s.locks.queues.Get(h.name) // kept while m waits in it (unqueue)
		m.members = append(m.members, h.q.PushGroup(probe(h.name, c), m))
	}
	return m, nil
}

// unqueue gives back the queues m waited in.
func (s *Service) unqueue(m *multiWaiter, holds []lockHold) {
	for _, h := range holds {
		s.locks.queues.Put(h.name, h.q)
	}
}

// grantQueuedMulti grants m if it heads every one of its names' FIFOs
// and each has room, all held: it pops m from each and proposes its
// MultiAcquire. Otherwise a name is still held (its freeing will say
// Ready again), or m was answered, or it gave up.
func (s *Service) grantQueuedMulti(m *multiWaiter) {
	holds, release := s.holdMulti(m.cmd.Names)
	defer release()
	m.kicked.Store(false) // a Ready from here on tries again
	if m.taken || m.left {
		return
	}
	for i, h := range holds {
		if h.q.Head() != m.members[i] || !h.room(m.members[i].Cmd) {
			return
		}
	}
	for _, h := range holds {
		h.q.Pop()
		h.applied = true // serve whoever is behind it on release, granted or not
	}
	m.taken = true
	m.answer(s.grantMulti(m.cmd))
}

// waitMulti waits for m's answer for up to wait. A waiter whose wait
// ends leaves every queue, holding them all, unless its grant took it
// first (then that grant is its answer); the names it kept are served to
// the waiters behind it, and it is answered as a multi-acquire without a
// wait would be.
func (s *Service) waitMulti(ctx context.Context, m *multiWaiter, wait time.Duration) (fsm.MultiResult, error) {
	ended, stop := s.waitFor(wait)
	defer stop()
	var got *multiAnswer
	select {
	case a := <-m.result:
		got = &a
	case <-ended:
	case <-ctx.Done():
	case <-s.stop:
	}
	holds, release := s.holdMulti(m.cmd.Names)
	defer release()
	defer s.unqueue(m, holds)
	if got == nil && m.taken {
		a := <-m.result
		got = &a
	}
	if got == nil {
		select {
		case a := <-m.result: // leadership was lost as the wait ended
			got = &a
		default:
		}
	}
	m.left = true
	if got == nil {
		for _, h := range holds {
			// Waiters left ahead of it on a free name (by a leader that
			// did not know an entry freed it) go first, as they would
			// have; serving stops at it.
			s.locks.serve(h.q, h.name)
		}
	}
	for i, h := range holds {
		if h.q.Leave(m.members[i]) && got == nil {
			h.applied = true // serve the waiters it kept this name from
		}
	}
	switch {
	case got != nil:
		// Granted, or answered by a lost leadership (whose other
		// waiters just left their queues).
		return got.r, got.err
	case ctx.Err() != nil:
		return fsm.MultiResult{}, ctx.Err()
	}
	return s.multiNow(holds, m.cmd)
}
