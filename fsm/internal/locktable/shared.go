package locktable

import (
	"slices"
	"strings"
)

// Shared is the held shared grants of locks, by lock name, each lock's in
// token order, with how many each holder holds. A lock is held either by
// one exclusive grant (Table) or by shared grants here, never both: the
// acquire's apply refuses the other. Its entries are Table's, immutable
// once stored, so a snapshot captures their pointers.
type Shared struct {
	locks    map[string][]*Entry
	byHolder map[string]int
	n        int
}

// NewShared returns an empty table.
func NewShared() *Shared {
	return &Shared{locks: map[string][]*Entry{}, byHolder: map[string]int{}}
}

// Get returns lock name's shared grants in token order (shared with the
// table: not to be modified).
func (t *Shared) Get(name string) []*Entry { return t.locks[name] }

// Grant returns lock name's shared grant with token.
func (t *Shared) Grant(name string, token uint64) (*Entry, bool) {
	for _, e := range t.locks[name] {
		if e.token == token {
			return e, true
		}
	}
	return nil, false
}

// Add puts a new shared grant in the table; its token is above every
// token held (tokens increase), so the lock's grants stay in token order.
func (t *Shared) Add(e *Entry) {
	// A new slice: a captured View may still hold the old one.
	t.locks[e.Name()] = append(slices.Clip(t.locks[e.Name()]), e)
	t.byHolder[e.Holder()]++
	t.n++
}

// Replace puts e in the place of the held grant with its token.
func (t *Shared) Replace(e *Entry) {
	old := t.locks[e.Name()]
	i := slices.IndexFunc(old, func(o *Entry) bool { return o.token == e.token })
	if i < 0 {
		return
	}
	grants := slices.Clone(old)
	grants[i] = e
	t.locks[e.Name()] = grants
}

// Remove ends a shared grant.
func (t *Shared) Remove(e *Entry) {
	old := t.locks[e.Name()]
	i := slices.Index(old, e)
	if i < 0 {
		return
	}
	if len(old) == 1 {
		delete(t.locks, e.Name())
	} else {
		t.locks[e.Name()] = slices.Delete(slices.Clone(old), i, i+1)
	}
	if t.byHolder[e.Holder()]--; t.byHolder[e.Holder()] <= 0 {
		delete(t.byHolder, e.Holder())
	}
	t.n--
}

// Len counts the shared grants held.
func (t *Shared) Len() int { return t.n }

// Locks counts the locks held in shared mode.
func (t *Shared) Locks() int { return len(t.locks) }

// HeldBy counts the shared grants holder holds.
func (t *Shared) HeldBy(holder string) int { return t.byHolder[holder] }

// Entries returns every shared grant, sorted by lock name then token.
func (t *Shared) Entries() []*Entry {
	out := make([]*Entry, 0, t.n)
	names := make([]string, 0, len(t.locks))
	for name := range t.locks {
		names = append(names, name)
	}
	slices.SortFunc(names, strings.Compare)
	for _, name := range names {
		out = append(out, t.locks[name]...)
	}
	return out
}
