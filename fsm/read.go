package fsm

// Lock returns the current grant of a lock, if it is held.
func (f *FSM) Lock(name string) (Lock, bool) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	l, ok := f.s.locks[name]
	if !ok {
		return Lock{}, false
	}
	return *l, true
}

// LockCount returns how many locks are held, and how many by holder.
func (f *FSM) LockCount(holder string) (total, byHolder int) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return len(f.s.locks), f.s.byHolder[holder]
}

// Locks returns every held lock, sorted by name.
func (f *FSM) Locks() []Lock {
	f.mu.RLock()
	defer f.mu.RUnlock()
	out := make([]Lock, 0, len(f.s.locks))
	for _, name := range sortedKeys(f.s.locks) {
		out = append(out, *f.s.locks[name])
	}
	return out
}

// Key returns a fenced key's value and last token.
func (f *FSM) Key(key string) (FencedKey, bool) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	k, ok := f.s.keys[key]
	if !ok {
		return FencedKey{}, false
	}
	return *k, true
}

// Members returns the recorded member addresses, sorted by id.
func (f *FSM) Members() []Member {
	f.mu.RLock()
	defer f.mu.RUnlock()
	out := make([]Member, 0, len(f.s.members))
	for _, id := range sortedKeys(f.s.members) {
		out = append(out, f.s.members[id])
	}
	return out
}

// Member returns one member's recorded addresses.
func (f *FSM) Member(id string) (Member, bool) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	m, ok := f.s.members[id]
	return m, ok
}

// Epoch returns the current token epoch.
func (f *FSM) Epoch() uint64 {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.s.epoch
}

// ClusterID returns the cluster's id, empty until its first leader names it.
func (f *FSM) ClusterID() string {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.s.clusterID
}

// LastToken returns the highest token ever granted.
func (f *FSM) LastToken() uint64 {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.s.lastToken
}

// AppliedIndex returns the index of the last entry this FSM applied.
func (f *FSM) AppliedIndex() uint64 {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.applied
}

// RequestGranted reports whether an acquire request id already produced a
// grant (which may have ended since).
func (f *FSM) RequestGranted(lock, holder, requestID string) bool {
	f.mu.RLock()
	defer f.mu.RUnlock()
	_, ok := f.s.requests[requestKey(lock, holder, requestID)]
	return ok
}

// Counts is a cheap summary of the state, for metrics.
type Counts struct {
	Locks, Keys, Members int
	Epoch, LastToken     uint64
}

// Counts summarizes the state without copying it.
func (f *FSM) Counts() Counts {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return Counts{Locks: len(f.s.locks), Keys: len(f.s.keys), Members: len(f.s.members), Epoch: f.s.epoch, LastToken: f.s.lastToken}
}
