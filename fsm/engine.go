package fsm

import (
	"github.com/fencer-io/fencer/fsm/entry"
	"github.com/fencer-io/fencer/fsm/internal/locktable"
)

// What coord's grant engine asks of the state about one name, in one read
// (coord/DESIGN.md, "The grant engine"): who holds it and how many may, what
// keeps it closed (a lock-delay), whether a request was already granted, and
// the grant counts the limits on held grants compare. It reads the name's
// primitive in its own table; the tables stay as they are.

// Kind is the primitive a name belongs to: each kind's names are a
// namespace of their own.
type Kind uint8

// The kinds of grants.
const (
	KindLock Kind = iota + 1
	KindSemaphore
)

// Held is one held grant of a name, whatever its kind: what renewal,
// expiry and the engine's refusals need of it.
type Held struct {
	Holder          string
	Token           uint64
	Secret          string
	TTLMillis       int64
	LockDelayMillis int64
	// Session is the session the grant lives under (0: none): it has no
	// lease of its own to renew.
	Session uint64
	// Shared: one of a lock's shared grants.
	Shared bool
	// Multi: the grant is one name of a multi-grant (multilock.go), whose
	// one lease is timed and renewed for all its names.
	Multi bool
}

// NameState is the engine's view of one name.
type NameState struct {
	Kind Kind
	Name string
	// Holders are the grants held, sorted by token: for a lock, its
	// exclusive grant or its shared ones.
	Holders []Held
	// Limit is how many may hold at once: 1 for a lock, a semaphore's
	// limit (0 when no permit is held or delayed: the next acquire sets it).
	Limit int
	// Delays are the lock-delays keeping the name, or some of its slots,
	// from anybody: a lock's one, or a semaphore's delayed slots (which
	// count against its limit).
	Delays []entry.Delay
	// Granted: the request id asked about already produced a grant of
	// this name (which may have ended since).
	Granted bool
	// Waiting is the Enqueue index of the durable waiter queued for the
	// request asked about (0: none; durable.go).
	Waiting uint64
	// Total and Mine count the grants held, locks and permits together, in
	// all and by the holder asked about (GrantCount).
	Total, Mine int

	// Lock is the lock's grant, when a lock is held; Semaphore the
	// semaphore's state, for a semaphore: the records as their own reads
	// return them, for answers that carry them.
	Lock      entry.Lock
	Semaphore SemaphoreState
}

// Grant returns the held grant with token, if it is held.
func (st NameState) Grant(token uint64) (Held, bool) {
	for _, h := range st.Holders {
		if h.Token == token {
			return h, true
		}
	}
	return Held{}, false
}

// InUse counts the holders and the delayed slots: a name is full when
// InUse reaches a Limit it has.
func (st NameState) InUse() int { return len(st.Holders) + len(st.Delays) }

// NameState reads name of kind as the engine needs it, under one hold of
// the state's lock: holder, requestID and principal are the acquire being
// decided ("" when there is none: no request is then looked up).
func (f *FSM) NameState(kind Kind, name, holder, requestID, principal string) NameState {
	f.mu.RLock()
	defer f.mu.RUnlock()
	s := f.s
	st := NameState{Kind: kind, Name: name}
	st.Total = s.locks.Len() + s.shared.Len() + s.sems.Held()
	st.Mine = s.locks.HeldBy(holder) + s.shared.HeldBy(holder) + s.sems.HeldBy(holder)
	var requestKey string
	switch kind {
	case KindLock:
		st.Limit = 1
		if e, ok := s.locks.Get(name); ok {
			st.Lock = e.Lock()
			st.Holders = []Held{{Holder: e.Holder(), Token: e.Token(), Secret: e.Secret(),
				TTLMillis: e.TTLMillis(), LockDelayMillis: e.LockDelayMillis(), Session: e.Session(), Multi: s.multis[e.Token()] != nil}}
		}
		for _, e := range s.shared.Get(name) {
			st.Holders = append(st.Holders, Held{Holder: e.Holder(), Token: e.Token(), Secret: e.Secret(),
				TTLMillis: e.TTLMillis(), LockDelayMillis: e.LockDelayMillis(), Session: e.Session(), Shared: true})
		}
		if d, ok := s.delays[name]; ok {
			st.Delays = []entry.Delay{d}
		}
		requestKey = locktable.RequestKey(name, holder, requestID, principal)
	case KindSemaphore:
		st.Semaphore = semState(name, s.sems.Get(name))
		st.Limit, st.Delays = st.Semaphore.Limit, st.Semaphore.Delays
		for _, p := range st.Semaphore.Permits {
			st.Holders = append(st.Holders, Held{Holder: p.Holder, Token: p.Token, Secret: p.Lease,
				TTLMillis: p.TTLMillis, LockDelayMillis: p.LockDelayMillis, Session: p.Session})
		}
		requestKey = semRequestKey(name, holder, requestID, principal)
	}
	if requestID != "" {
		_, st.Granted = s.requests.Token(requestKey)
		if w := s.durableWaiter(waitKey{kind, name}, holder, requestID, principal); w != nil {
			st.Waiting = w.Index
		}
	}
	return st
}
