package fsm

import (
	"sort"
	"strings"

	"github.com/fencer-io/fencer/fsm/entry"
	"github.com/fencer-io/fencer/fsm/internal/grants"
	"github.com/fencer-io/fencer/fsm/snapshot"
)

// MaxRequestIDs bounds the idempotency table of acquire request ids; the
// oldest entries are forgotten first, in log order, so every replica forgets
// the same ones.
const MaxRequestIDs = 1 << 16

// lockEntry is a grant as the state keeps it: 56 bytes and one string,
// where a Lock is 104 bytes and five strings. The string holds, in order,
// the lock name, NUL, the holder, NUL, the request id, then NUL and the
// principal if there is one, and the secret, so that its prefix up to the
// secret is the lock's request key (requestKey) and the request table
// shares it instead of building another.
//
// An entry is never modified once it is in the state: a grant makes a new
// one and a free deletes it. A snapshot therefore captures entry pointers,
// not copies (see View).
type lockEntry struct {
	s         string
	token     uint64
	ttlMillis int64
	granted   int64  // GrantedAtMillis
	delay     int64  // LockDelayMillis
	value     string // Value
	nameEnd   uint32 // s[:nameEnd] is the name
	holderEnd uint32 // s[nameEnd+1:holderEnd] is the holder
	idEnd     uint32 // s[holderEnd+1:idEnd] is the request id
	keyEnd    uint32 // s[idEnd+1:keyEnd] is the principal, if keyEnd > idEnd; s[keyEnd:] the secret
}

func newLockEntry(l *entry.Lock) *lockEntry {
	var sb strings.Builder // one allocation: String() shares its buffer
	sb.Grow(len(l.Name) + len(l.Holder) + len(l.RequestID) + len(l.Principal) + len(l.Lease) + 3)
	sb.WriteString(l.Name)
	nameEnd := sb.Len()
	sb.WriteByte(0)
	sb.WriteString(l.Holder)
	holderEnd := sb.Len()
	sb.WriteByte(0)
	sb.WriteString(l.RequestID)
	idEnd := sb.Len()
	if l.Principal != "" {
		sb.WriteByte(0)
		sb.WriteString(l.Principal)
	}
	keyEnd := sb.Len()
	sb.WriteString(l.Lease)
	return &lockEntry{
		s:         sb.String(),
		token:     l.Token,
		ttlMillis: l.TTLMillis,
		granted:   l.GrantedAtMillis,
		delay:     l.LockDelayMillis,
		value:     l.Value,
		nameEnd:   uint32(nameEnd),
		holderEnd: uint32(holderEnd),
		idEnd:     uint32(idEnd),
		keyEnd:    uint32(keyEnd),
	}
}

// lockEntryOf is newLockEntry of a snapshot's lock record, copying its
// bytes once, into the entry's string.
func lockEntryOf(r *snapshot.LockRecord) *lockEntry {
	var sb strings.Builder
	sb.Grow(len(r.Name) + len(r.Holder) + len(r.RequestID) + len(r.Principal) + len(r.Lease) + 3)
	sb.Write(r.Name)
	nameEnd := sb.Len()
	sb.WriteByte(0)
	sb.Write(r.Holder)
	holderEnd := sb.Len()
	sb.WriteByte(0)
	sb.Write(r.RequestID)
	idEnd := sb.Len()
	if len(r.Principal) > 0 {
		sb.WriteByte(0)
		sb.Write(r.Principal)
	}
	keyEnd := sb.Len()
	sb.Write(r.Lease)
	e := &lockEntry{
		s:         sb.String(),
		token:     r.Token,
		ttlMillis: r.TTLMillis,
		granted:   r.GrantedAtMillis,
		delay:     r.LockDelayMillis,
		nameEnd:   uint32(nameEnd),
		holderEnd: uint32(holderEnd),
		idEnd:     uint32(idEnd),
		keyEnd:    uint32(keyEnd),
	}
	if len(r.Value) > 0 {
		e.value = string(r.Value)
	}
	return e
}

func (e *lockEntry) name() string   { return e.s[:e.nameEnd] }
func (e *lockEntry) holder() string { return e.s[e.nameEnd+1 : e.holderEnd] }
func (e *lockEntry) secret() string { return e.s[e.keyEnd:] }

// requestKey is requestKey(name, holder, request id, principal), sharing
// e's string.
func (e *lockEntry) requestKey() string { return e.s[:e.keyEnd] }

func (e *lockEntry) principal() string {
	if e.keyEnd == e.idEnd {
		return ""
	}
	return e.s[e.idEnd+1 : e.keyEnd]
}

// lock returns the entry as a Lock; its strings share the entry's.
func (e *lockEntry) lock() entry.Lock {
	return entry.Lock{
		Name:            e.name(),
		Holder:          e.holder(),
		Token:           e.token,
		Lease:           e.secret(),
		TTLMillis:       e.ttlMillis,
		RequestID:       e.s[e.holderEnd+1 : e.idEnd],
		GrantedAtMillis: e.granted,
		Principal:       e.principal(),
		LockDelayMillis: e.delay,
		Value:           e.value,
	}
}

// state is everything the FSM replicates. It is only touched under FSM.mu.
type state struct {
	clusterID string
	epoch     uint64
	// floor is the oldest epoch whose tokens a fenced write may carry: the
	// epoch a restore or forced recovery moved to (0: none yet). Every
	// grant of an earlier epoch was voided then, whatever the key's mark.
	floor     uint64
	lastToken uint64 // highest token ever granted
	locks     map[string]*lockEntry
	keys      map[string]*entry.FencedKey // a *FencedKey is never modified once stored
	members   map[string]entry.Member
	requests  map[string]uint64 // requestKey(lock, holder, request id, principal) → token
	// reqOrder is the request table in log order, oldest first. It only
	// grows at the end and is cut at the front, never written in place, so
	// a snapshot keeps the slice as it was without copying it.
	reqOrder []entry.RequestRecord
	byHolder map[string]int // held locks per holder; derived, not snapshotted
	// kvBytes and kvByPrincipal are the value bytes stored, in all and per
	// writer; derived from keys, not snapshotted.
	kvBytes       int64
	kvByPrincipal map[string]int64
	delays        map[string]entry.Delay
	sems          map[string]*semaphore // only those with a permit held
	permits       int                   // held in all sems; derived, not snapshotted
	// history is the grant history, nil until SetGrantHistory (history.go).
	history *grants.History
	// restoredAt is the index at which a restore or recovery installed
	// this state (0: none), and voided the grants it dropped there, which
	// every member that installs it reports as events (events.go); voided
	// is forgotten once a later entry is applied.
	restoredAt uint64
	voided     []entry.VoidedGrant
}

func newState() *state {
	return &state{
		locks:         map[string]*lockEntry{},
		keys:          map[string]*entry.FencedKey{},
		members:       map[string]entry.Member{},
		requests:      map[string]uint64{},
		byHolder:      map[string]int{},
		kvByPrincipal: map[string]int64{},
		delays:        map[string]entry.Delay{},
		sems:          map[string]*semaphore{},
	}
}

// requestKey is what the request table remembers a request id under. The
// principal comes last and only when there is one, so that the keys of
// requests without a principal are those older builds wrote (lock, holder
// and request id never contain NUL: names, and printable API strings).
func requestKey(lock, holder, id, principal string) string {
	k := lock + "\x00" + holder + "\x00" + id
	if principal != "" {
		k += "\x00" + principal
	}
	return k
}

// setKey stores k, replacing the key of that name, and keeps the byte
// counts.
func (s *state) setKey(k *entry.FencedKey) {
	s.deleteKey(k.Key)
	s.keys[k.Key] = k
	s.charge(k.Principal, int64(len(k.Value)))
}

// deleteKey removes a key, if any, and returns it.
func (s *state) deleteKey(name string) (*entry.FencedKey, bool) {
	old, ok := s.keys[name]
	if ok {
		delete(s.keys, name)
		s.charge(old.Principal, -int64(len(old.Value)))
	}
	return old, ok
}

func (s *state) charge(principal string, n int64) {
	s.kvBytes += n
	if s.kvByPrincipal[principal] += n; s.kvByPrincipal[principal] == 0 {
		delete(s.kvByPrincipal, principal)
	}
}

func (s *state) remember(key string, token uint64) {
	if _, ok := s.requests[key]; ok {
		return
	}
	s.requests[key] = token
	s.reqOrder = append(s.reqOrder, entry.RequestRecord{Key: key, Token: token})
	if len(s.reqOrder) > MaxRequestIDs {
		// Not zeroed: a snapshot may share the slot. The backing array is
		// replaced, with only the live records, when append outgrows it.
		delete(s.requests, s.reqOrder[0].Key)
		s.reqOrder = s.reqOrder[1:]
	}
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
