package lease

// keyIndex finds a tracked deadline by its Key. A key without an ID (a
// lock's lease, a lock's lock-delay) is looked up by name in a map of its
// kind's: a million lock leases then cost a string-keyed map slot each (24
// bytes), as before keys were typed, instead of a Key-keyed one (40 bytes,
// about 45 bytes more per lease at a million, measured). Keys with an ID
// (a permit, a slot's delay, a session) share one map by Key.
type keyIndex struct {
	byName []map[string]*tracked // indexed by Kind; nil until the kind is used
	byKey  map[Key]*tracked
	n      int
}

// newKeyIndex returns an empty index; hint sizes the first kind's map of
// names (a new leader's locks: timed.All yields them first).
func newKeyIndex(hint int) keyIndex {
	x := keyIndex{byKey: map[Key]*tracked{}}
	if hint > 0 {
		x.byName = []map[string]*tracked{make(map[string]*tracked, hint)}
	}
	return x
}

func (x *keyIndex) get(k Key) (*tracked, bool) {
	if k.ID != 0 {
		t, ok := x.byKey[k]
		return t, ok
	}
	if int(k.Kind) >= len(x.byName) {
		return nil, false
	}
	t, ok := x.byName[k.Kind][k.Name]
	return t, ok
}

func (x *keyIndex) put(k Key, t *tracked) {
	if _, ok := x.get(k); !ok {
		x.n++
	}
	if k.ID != 0 {
		x.byKey[k] = t
		return
	}
	for int(k.Kind) >= len(x.byName) {
		x.byName = append(x.byName, nil)
	}
	if x.byName[k.Kind] == nil {
		x.byName[k.Kind] = map[string]*tracked{}
	}
	x.byName[k.Kind][k.Name] = t
}

func (x *keyIndex) remove(k Key) {
	if _, ok := x.get(k); !ok {
		return
	}
	x.n--
	if k.ID != 0 {
		delete(x.byKey, k)
		return
	}
	delete(x.byName[k.Kind], k.Name)
}

func (x *keyIndex) len() int { return x.n }

// each calls fn with every tracked deadline (tests).
func (x *keyIndex) each(fn func(*tracked)) {
	for _, m := range x.byName {
		for _, t := range m {
			fn(t)
		}
	}
	for _, t := range x.byKey {
		fn(t)
	}
}
