package lease

import "hash/maphash"

// slot is a tracked deadline's place in a leaseTable: the heap and the
// index hold slots, not pointers, so that a million leases are a few large
// pointer-free arrays the collector need not trace, not a million objects.
type slot int32

// A tracked record's heap position (tracked.index) outside the heap.
const (
	unscheduled int32 = -1 // tracked, not in the heap (its expiry is under way)
	released    int32 = -2 // a free slot
)

// chunkBits sizes the slab's chunks: 4,096 records (256 KB). The slab
// grows a chunk at a time, never copying what it holds, so that tracking
// the millionth lease neither stalls on a 64 MB copy nor holds the old and
// new arrays at once.
const chunkBits = 12

const chunkSize = 1 << chunkBits

// leaseTable holds every tracked deadline, by slot in a slab of chunks,
// and finds it by Key in an open-addressed index of slots. A lease costs
// its 64-byte record and 11 to 21 bytes of index (8-byte buckets, 3/8 to
// 3/4 full), 85 bytes of heap at a million with the heap's slot; as a
// 64-byte object behind a Go map of pointers and a heap of pointers
// (before issue 31) it cost 129, and a million objects for the collector
// to trace. Freed slots are reused before the slab grows; the table
// shrinks only when the leader steps down and drops it.
type leaseTable struct {
	chunks [][]tracked // chunkSize records each; the first grows to it
	free   []slot      // released slots, reused first
	used   slot        // slots ever handed out

	seed  maphash.Seed
	index []bucket // a power of two long, at most 3/4 full
	n     int
}

// bucket is one place in the index: a slot (plus one, so that the zero
// bucket is empty) and the low half of its key's hash, which lets a probe
// pass another key without reading its record, and lets the index grow
// without hashing every name again.
type bucket struct {
	ref  int32 // slot+1; 0 when empty
	hash uint32
}

// newLeaseTable returns an empty table sized for about hint leases (a new
// leader's: one grows no array step by step).
func newLeaseTable(hint int) leaseTable {
	size := 8
	for size*3 < max(hint, 0)*4 {
		size *= 2
	}
	x := leaseTable{seed: maphash.MakeSeed(), index: make([]bucket, size)}
	if hint > 0 {
		x.chunks = make([][]tracked, 0, (hint+chunkSize-1)/chunkSize)
		x.chunks = append(x.chunks, make([]tracked, 0, min(hint, chunkSize)))
	}
	return x
}

// rec is the record in s; it moves when the first chunk grows, so it is
// not kept across an add.
func (x *leaseTable) rec(s slot) *tracked {
	return &x.chunks[s>>chunkBits][s&(chunkSize-1)]
}

func (x *leaseTable) hash(k Key) uint32 { return uint32(maphash.Comparable(x.seed, k)) }

// find returns where k is in the index, or the empty bucket where it
// would go.
func (x *leaseTable) find(k Key, h uint32) (pos int, found bool) {
	mask := len(x.index) - 1
	for pos = int(h) & mask; ; pos = (pos + 1) & mask {
		b := x.index[pos]
		if b.ref == 0 {
			return pos, false
		}
		if b.hash == h && x.rec(slot(b.ref-1)).hasKey(k) {
			return pos, true
		}
	}
}

func (x *leaseTable) get(k Key) (slot, bool) {
	pos, ok := x.find(k, x.hash(k))
	return slot(x.index[pos].ref - 1), ok
}

// add returns the slot of k's record, making an empty one with k's key
// (not in the heap) if there is none.
func (x *leaseTable) add(k Key) slot {
	h := x.hash(k)
	pos, ok := x.find(k, h)
	if ok {
		return slot(x.index[pos].ref - 1)
	}
	if (x.n+1)*4 > len(x.index)*3 {
		x.grow()
		pos, _ = x.find(k, h)
	}
	s := x.alloc()
	*x.rec(s) = tracked{name: k.Name, id: k.ID, kind: k.Kind, index: unscheduled}
	x.index[pos] = bucket{ref: int32(s) + 1, hash: h}
	x.n++
	return s
}

// grow doubles the index; the stored hashes place every slot again.
func (x *leaseTable) grow() {
	old := x.index
	x.index = make([]bucket, 2*len(old))
	mask := len(x.index) - 1
	for _, b := range old {
		if b.ref == 0 {
			continue
		}
		pos := int(b.hash) & mask
		for x.index[pos].ref != 0 {
			pos = (pos + 1) & mask
		}
		x.index[pos] = b
	}
}

// chunkCap is the capacity a new chunk c starts with: a leader with a
// handful of leases holds a small first chunk, which append grows.
func chunkCap(c int) int {
	if c == 0 {
		return 8
	}
	return chunkSize
}

func (x *leaseTable) alloc() slot {
	if n := len(x.free); n > 0 {
		s := x.free[n-1]
		x.free = x.free[:n-1]
		return s
	}
	s := x.used
	x.used++
	c := int(s >> chunkBits)
	if c == len(x.chunks) {
		x.chunks = append(x.chunks, make([]tracked, 0, chunkCap(c)))
	}
	x.chunks[c] = append(x.chunks[c], tracked{})
	return s
}

// remove forgets k's record and frees its slot; the caller has taken it
// out of the heap.
func (x *leaseTable) remove(k Key) {
	pos, ok := x.find(k, x.hash(k))
	if !ok {
		return
	}
	s := slot(x.index[pos].ref - 1)
	*x.rec(s) = tracked{index: released} // drops the name for the collector
	x.free = append(x.free, s)
	x.n--
	x.unlink(pos)
}

// unlink empties the index at pos, moving back each later key of the same
// run that may no longer be reached past the hole (linear probing's
// deletion, which leaves no tombstones to slow later probes).
func (x *leaseTable) unlink(pos int) {
	mask := len(x.index) - 1
	for {
		x.index[pos] = bucket{}
		next := pos
		for {
			next = (next + 1) & mask
			b := x.index[next]
			if b.ref == 0 {
				return
			}
			home := int(b.hash) & mask
			if (next-home)&mask >= (next-pos)&mask {
				break // its probe passes pos: move it there
			}
		}
		x.index[pos] = x.index[next]
		pos = next
	}
}

func (x *leaseTable) len() int { return x.n }

// each calls fn with every tracked deadline (tests).
func (x *leaseTable) each(fn func(*tracked)) {
	for _, chunk := range x.chunks {
		for i := range chunk {
			if chunk[i].index != released {
				fn(&chunk[i])
			}
		}
	}
}
