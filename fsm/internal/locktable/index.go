package locktable

import "hash/maphash"

// index finds the held entries by lock name: an open-addressed table of
// entry pointers with linear probing, beside the low half of each name's
// hash, so that a probe passes another name without reading its entry.
// A lock costs 12 bytes a place, at most 3/4 of the places full: 16 to
// 32 bytes a lock (24 at a million), where a Go map of string to entry
// pointer costs 40 to 56 (a 16-byte key and a pointer a slot, and its
// control bytes) and two pointers a lock for the collector (issue 31).
// The order of the places follows a seed drawn per process, as a map's
// does; nothing the state decides depends on it.
type index struct {
	seed    maphash.Seed
	entries []*Entry // a power of two long; nil where empty
	hashes  []uint32 // the low half of the name's hash, beside each entry
	n       int
}

func newIndex(hint int) index {
	size := 8
	for size*3 < max(hint, 0)*4 {
		size *= 2
	}
	return index{seed: maphash.MakeSeed(), entries: make([]*Entry, size), hashes: make([]uint32, size)}
}

func (x *index) hash(name string) uint32 { return uint32(maphash.String(x.seed, name)) }

// find returns where name is, or the empty place where it would go.
func (x *index) find(name string, h uint32) (pos int, found bool) {
	mask := len(x.entries) - 1
	for pos = int(h) & mask; ; pos = (pos + 1) & mask {
		e := x.entries[pos]
		if e == nil {
			return pos, false
		}
		if x.hashes[pos] == h && e.Name() == name {
			return pos, true
		}
	}
}

func (x *index) get(name string) (*Entry, bool) {
	pos, ok := x.find(name, x.hash(name))
	return x.entries[pos], ok
}

// put stores e under its name, in the place of the entry there if any.
func (x *index) put(e *Entry) {
	h := x.hash(e.Name())
	pos, ok := x.find(e.Name(), h)
	if !ok {
		if (x.n+1)*4 > len(x.entries)*3 {
			x.grow()
			pos, _ = x.find(e.Name(), h)
		}
		x.n++
	}
	x.entries[pos], x.hashes[pos] = e, h
}

// grow doubles the table; the stored hashes place every entry again.
func (x *index) grow() {
	old, oldHashes := x.entries, x.hashes
	x.entries, x.hashes = make([]*Entry, 2*len(old)), make([]uint32, 2*len(old))
	mask := len(x.entries) - 1
	for i, e := range old {
		if e == nil {
			continue
		}
		pos := int(oldHashes[i]) & mask
		for x.entries[pos] != nil {
			pos = (pos + 1) & mask
		}
		x.entries[pos], x.hashes[pos] = e, oldHashes[i]
	}
}

// remove forgets name's entry.
func (x *index) remove(name string) {
	pos, ok := x.find(name, x.hash(name))
	if !ok {
		return
	}
	x.n--
	// Linear probing's deletion: move back each later entry of the run
	// whose probe passes the hole, so that no tombstones slow later probes.
	mask := len(x.entries) - 1
	for {
		x.entries[pos], x.hashes[pos] = nil, 0
		next := pos
		for {
			next = (next + 1) & mask
			if x.entries[next] == nil {
				return
			}
			home := int(x.hashes[next]) & mask
			if (next-home)&mask >= (next-pos)&mask {
				break // its probe passes pos: move it there
			}
		}
		x.entries[pos], x.hashes[pos] = x.entries[next], x.hashes[next]
		pos = next
	}
}
