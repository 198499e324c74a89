package fsm

import (
	"iter"

	"github.com/fencer-io/fencer/fsm/entry"
	"github.com/fencer-io/fencer/fsm/internal/locktable"
)

// Lock returns the current grant of a lock, if it is held.
func (f *FSM) Lock(name string) (entry.Lock, bool) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	e, ok := f.s.locks.Get(name)
	if !ok {
		return entry.Lock{}, false
	}
	return f.s.lockOf(e), true
}

// LockCount returns how many locks are held, and how many by holder.
func (f *FSM) LockCount(holder string) (total, byHolder int) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.s.locks.Len(), f.s.locks.HeldBy(holder)
}

// GrantCount returns how many grants are held, locks and semaphore permits
// together, in all and by holder: what the limits on held locks count.
func (f *FSM) GrantCount(holder string) (total, byHolder int) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.s.locks.Len() + f.s.sems.Held(), f.s.locks.HeldBy(holder) + f.s.sems.HeldBy(holder)
}

// Locks returns every held lock, sorted by name.
func (f *FSM) Locks() []entry.Lock {
	_, entries := f.lockEntries()
	out := make([]entry.Lock, len(entries))
	for i, e := range entries {
		out[i] = e.Lock()
	}
	return out
}

// LocksAt returns the applied index of one moment and every lock held then,
// sorted by name, as a sequence: it holds one pointer per lock, not the
// locks, and yields without holding the FSM's lock, so a caller may stream
// the locks out as slowly as it likes.
func (f *FSM) LocksAt() (uint64, iter.Seq[entry.Lock]) {
	index, entries := f.lockEntries()
	return index, func(yield func(entry.Lock) bool) {
		for _, e := range entries {
			if !yield(e.Lock()) {
				return
			}
		}
	}
}

// EachLockUnordered calls fn with every held lock as of one moment, in no
// particular order: LocksAt without its sort, for a caller that indexes
// the locks itself (a new leader restarting a million leases).
func (f *FSM) EachLockUnordered(fn func(entry.Lock)) {
	_, entries := f.unsortedEntries()
	for _, e := range entries {
		fn(e.Lock())
	}
}

// lockEntries returns the held locks sorted by name, and the applied index
// they were read at. Only the pointers are taken under the lock; entries are
// immutable, so sorting happens outside.
func (f *FSM) lockEntries() (uint64, []*locktable.Entry) {
	index, entries := f.unsortedEntries()
	locktable.Sort(entries)
	return index, entries
}

// unsortedEntries takes the held locks' pointers under the lock.
func (f *FSM) unsortedEntries() (uint64, []*locktable.Entry) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.applied, f.s.locks.Entries()
}

// Key returns a fenced key's value and last token.
func (f *FSM) Key(key string) (entry.FencedKey, bool) {
	k, ok, _ := f.KeyAt(key)
	return k, ok
}

// KeyAt is Key, and returns the applied index it was read at.
func (f *FSM) KeyAt(key string) (entry.FencedKey, bool, uint64) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	k, ok := f.s.keys.Get(key)
	if !ok {
		return entry.FencedKey{}, false, f.applied
	}
	return *k, true, f.applied
}

// Members returns the recorded member addresses, sorted by id.
func (f *FSM) Members() []entry.Member {
	f.mu.RLock()
	defer f.mu.RUnlock()
	out := make([]entry.Member, 0, len(f.s.members))
	for _, id := range sortedKeys(f.s.members) {
		out = append(out, f.s.members[id])
	}
	return out
}

// Member returns one member's recorded addresses.
func (f *FSM) Member(id string) (entry.Member, bool) {
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

// RequestGranted reports whether principal's acquire request id already
// produced a grant (which may have ended since).
func (f *FSM) RequestGranted(lock, holder, requestID, principal string) bool {
	f.mu.RLock()
	defer f.mu.RUnlock()
	_, ok := f.s.requests.Token(locktable.RequestKey(lock, holder, requestID, principal))
	return ok
}

// Counts is a cheap summary of the state, for metrics.
type Counts struct {
	Locks, Keys, Members int
	Epoch, LastToken     uint64
	// KVBytes is the value bytes of every fenced key.
	KVBytes int64
}

// Counts summarizes the state without copying it.
func (f *FSM) Counts() Counts {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return Counts{Locks: f.s.locks.Len(), Keys: f.s.keys.Len(), Members: len(f.s.members),
		Epoch: f.s.epoch, LastToken: f.s.lastToken, KVBytes: f.s.keys.Bytes()}
}

// KVUsage is what a fenced put would change: the store's totals, the
// writer's share, and the key it would replace.
type KVUsage struct {
	Keys      int   // keys stored
	Bytes     int64 // value bytes stored
	Principal int64 // value bytes whose last writer is the principal asked about
	// Exists says the key is stored; OldBytes is its value's length and
	// OldPrincipal its last writer.
	Exists       bool
	OldBytes     int64
	OldPrincipal string
}

// KVUsage returns the totals a put of key by principal would change.
func (f *FSM) KVUsage(key, principal string) KVUsage {
	f.mu.RLock()
	defer f.mu.RUnlock()
	u := KVUsage{Keys: f.s.keys.Len(), Bytes: f.s.keys.Bytes(), Principal: f.s.keys.BytesOf(principal)}
	if k, ok := f.s.keys.Get(key); ok {
		u.Exists, u.OldBytes, u.OldPrincipal = true, int64(len(k.Value)), k.Principal
	}
	return u
}
