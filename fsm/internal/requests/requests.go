// Package requests is the state's idempotency table: the token each
// acquire request id was granted, the oldest forgotten first, in log order,
// so that every replica forgets the same ones.
package requests

import "github.com/fencer-io/fencer/fsm/entry"

// Max bounds the table; past it the oldest request ids are forgotten.
const Max = 1 << 16

// Table is the request ids granted, by key (a lock's or a semaphore's
// request key), and the order they were granted in.
type Table struct {
	tokens map[string]uint64
	// order is the table in log order, oldest first. It only grows at the
	// end and is cut at the front, never written in place, so a snapshot
	// keeps the slice as it was without copying it (Records).
	order []entry.RequestRecord
}

// New returns an empty table.
func New() *Table { return &Table{tokens: map[string]uint64{}} }

// Token returns the token granted for key.
func (t *Table) Token(key string) (uint64, bool) {
	token, ok := t.tokens[key]
	return token, ok
}

// Remember records that key was granted token, unless it already was.
func (t *Table) Remember(key string, token uint64) {
	if _, ok := t.tokens[key]; ok {
		return
	}
	t.tokens[key] = token
	t.order = append(t.order, entry.RequestRecord{Key: key, Token: token})
	if len(t.order) > Max {
		// Not zeroed: a snapshot may share the slot. The backing array is
		// replaced, with only the live records, when append outgrows it.
		delete(t.tokens, t.order[0].Key)
		t.order = t.order[1:]
	}
}

// Len counts the request ids remembered.
func (t *Table) Len() int { return len(t.order) }

// Records returns the table in log order, as eviction order must survive
// a snapshot. The caller shares the slice and must not write to it; no
// later Remember writes into what it returned.
func (t *Table) Records() []entry.RequestRecord {
	return t.order[:len(t.order):len(t.order)]
}
