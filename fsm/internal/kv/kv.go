// Package kv is the state's fenced keys: each key's value, mark (last
// token) and last writer, and the value bytes stored, in all and per
// writer.
package kv

import "github.com/fencer-io/fencer/fsm/entry"

// Table is the fenced keys by name. A stored *FencedKey is never
// modified, so a snapshot captures the pointers.
type Table struct {
	keys map[string]*entry.FencedKey
	// bytes and byPrincipal are the value bytes stored, in all and per
	// writer; derived from keys, not snapshotted.
	bytes       int64
	byPrincipal map[string]int64
}

// New returns an empty table.
func New() *Table {
	return &Table{keys: map[string]*entry.FencedKey{}, byPrincipal: map[string]int64{}}
}

// Get returns a key.
func (t *Table) Get(name string) (*entry.FencedKey, bool) {
	k, ok := t.keys[name]
	return k, ok
}

// Mark is a key's last token, 0 if it was never written.
func (t *Table) Mark(name string) uint64 {
	if k, ok := t.keys[name]; ok {
		return k.Token
	}
	return 0
}

// Set stores k, replacing the key of that name, and keeps the byte
// counts.
func (t *Table) Set(k *entry.FencedKey) {
	t.Delete(k.Key)
	t.keys[k.Key] = k
	t.charge(k.Principal, int64(len(k.Value)))
}

// Delete removes a key, if any, and returns it.
func (t *Table) Delete(name string) (*entry.FencedKey, bool) {
	old, ok := t.keys[name]
	if ok {
		delete(t.keys, name)
		t.charge(old.Principal, -int64(len(old.Value)))
	}
	return old, ok
}

func (t *Table) charge(principal string, n int64) {
	t.bytes += n
	if t.byPrincipal[principal] += n; t.byPrincipal[principal] == 0 {
		delete(t.byPrincipal, principal)
	}
}

// Len counts the keys.
func (t *Table) Len() int { return len(t.keys) }

// Bytes returns the value bytes stored.
func (t *Table) Bytes() int64 { return t.bytes }

// BytesOf returns the value bytes whose last writer is principal.
func (t *Table) BytesOf(principal string) int64 { return t.byPrincipal[principal] }

// All returns the keys in no order, sharing them.
func (t *Table) All() []*entry.FencedKey {
	out := make([]*entry.FencedKey, 0, len(t.keys))
	for _, k := range t.keys {
		out = append(out, k)
	}
	return out
}
