// Package locktable is the state's table of held locks: each grant packed
// into one string, by lock name, with how many locks each holder holds.
package locktable

import (
	"encoding/binary"
	"slices"
	"strings"

	"github.com/fencer-io/fencer/fsm/entry"
	"github.com/fencer-io/fencer/fsm/snapshot"
)

// Entry is a grant as the table keeps it: 64 bytes and one string, where
// an entry.Lock is 104 bytes and five strings. The string holds, in order,
// the lock name, NUL, the holder, NUL, the request id, then NUL and the
// principal if there is one, the secret, the value, and last, only when
// either is not zero, the lock-delay and the session (8 bytes each, little
// endian), so that its prefix up to the secret is the grant's request key
// (RequestKey) and the request table shares it instead of building
// another. The value, the lock-delay and the session are rare (a million
// held leases have none): in the string they cost nothing when absent,
// and the entry fits the allocator's 64-byte class instead of its 96
// (issue 31).
//
// An entry is never modified once it is in the table: a grant makes a new
// one and a free deletes it. A snapshot therefore captures entry pointers,
// not copies (see fsm.View).
type Entry struct {
	s         string
	token     uint64
	ttlMillis int64
	granted   int64  // GrantedAtMillis
	nameEnd   uint32 // s[:nameEnd] is the name
	holderEnd uint32 // s[nameEnd+1:holderEnd] is the holder
	idEnd     uint32 // s[holderEnd+1:idEnd] is the request id
	keyEnd    uint32 // s[idEnd+1:keyEnd] is the principal, if keyEnd > idEnd
	secretEnd uint32 // s[keyEnd:secretEnd] is the secret
	valueEnd  uint32 // s[secretEnd:valueEnd] is the value; s[valueEnd:] the lock-delay and session, or nothing
}

// NewEntry returns l as an entry.
func NewEntry(l *entry.Lock) *Entry {
	e := pack(l.Name, l.Holder, l.RequestID, l.Principal, l.Lease, l.Value, l.LockDelayMillis, l.Session)
	e.token, e.ttlMillis, e.granted = l.Token, l.TTLMillis, l.GrantedAtMillis
	return e
}

// EntryOf returns a snapshot's lock record as an entry, copying its bytes
// once, into the entry's string.
func EntryOf(r *snapshot.LockRecord) *Entry {
	e := pack(r.Name, r.Holder, r.RequestID, r.Principal, r.Lease, r.Value, r.LockDelayMillis, r.Session)
	e.token, e.ttlMillis, e.granted = r.Token, r.TTLMillis, r.GrantedAtMillis
	return e
}

// pack lays the strings of a grant out in one, with its lock-delay and
// session if either is set, in one allocation (String shares the
// builder's buffer), from a Lock's strings or a record's bytes.
func pack[T string | []byte](name, holder, id, principal, secret, value T, delay int64, session uint64) *Entry {
	var sb strings.Builder
	rare := delay != 0 || session != 0
	n := len(name) + len(holder) + len(id) + len(principal) + len(secret) + len(value) + 3
	if rare {
		n += 16
	}
	sb.Grow(n)
	write(&sb, name)
	nameEnd := sb.Len()
	sb.WriteByte(0)
	write(&sb, holder)
	holderEnd := sb.Len()
	sb.WriteByte(0)
	write(&sb, id)
	idEnd := sb.Len()
	if len(principal) > 0 {
		sb.WriteByte(0)
		write(&sb, principal)
	}
	keyEnd := sb.Len()
	write(&sb, secret)
	secretEnd := sb.Len()
	write(&sb, value)
	valueEnd := sb.Len()
	if rare {
		var b [16]byte
		binary.LittleEndian.PutUint64(b[:8], uint64(delay))
		binary.LittleEndian.PutUint64(b[8:], session)
		sb.Write(b[:])
	}
	return &Entry{s: sb.String(), nameEnd: uint32(nameEnd), holderEnd: uint32(holderEnd), idEnd: uint32(idEnd),
		keyEnd: uint32(keyEnd), secretEnd: uint32(secretEnd), valueEnd: uint32(valueEnd)}
}

// write appends v to sb; the conversion to any does not allocate.
func write[T string | []byte](sb *strings.Builder, v T) {
	switch v := any(v).(type) {
	case string:
		sb.WriteString(v)
	case []byte:
		sb.Write(v)
	}
}

// Name returns the lock's name.
func (e *Entry) Name() string { return e.s[:e.nameEnd] }

// Holder returns the grant's holder.
func (e *Entry) Holder() string { return e.s[e.nameEnd+1 : e.holderEnd] }

// Secret returns the grant's secret (its "lease").
func (e *Entry) Secret() string { return e.s[e.keyEnd:e.secretEnd] }

// Token returns the grant's token.
func (e *Entry) Token() uint64 { return e.token }

// TTLMillis returns the grant's lease length.
func (e *Entry) TTLMillis() int64 { return e.ttlMillis }

// Session returns the session the grant lives under (0: none).
func (e *Entry) Session() uint64 { return e.rare(8) }

// LockDelayMillis returns the lock-delay the grant asked for.
func (e *Entry) LockDelayMillis() int64 { return int64(e.rare(0)) }

// rare reads the 8 bytes at off past the value: the lock-delay (0) or the
// session (8), both 0 when the string ends with the value.
func (e *Entry) rare(off int) uint64 {
	b := e.s[e.valueEnd:]
	if len(b) < 16 {
		return 0
	}
	var v uint64
	for i := off + 7; i >= off; i-- {
		v = v<<8 | uint64(b[i])
	}
	return v
}

// RequestKey is RequestKey(name, holder, request id, principal), sharing
// e's string.
func (e *Entry) RequestKey() string { return e.s[:e.keyEnd] }

func (e *Entry) principal() string {
	if e.keyEnd == e.idEnd {
		return ""
	}
	return e.s[e.idEnd+1 : e.keyEnd]
}

// Lock returns the entry as a Lock; its strings share the entry's.
func (e *Entry) Lock() entry.Lock {
	return entry.Lock{
		Name:            e.Name(),
		Holder:          e.Holder(),
		Token:           e.token,
		Lease:           e.Secret(),
		TTLMillis:       e.ttlMillis,
		RequestID:       e.s[e.holderEnd+1 : e.idEnd],
		GrantedAtMillis: e.granted,
		Principal:       e.principal(),
		LockDelayMillis: e.LockDelayMillis(),
		Value:           e.s[e.secretEnd:e.valueEnd],
		Session:         e.Session(),
	}
}

// RequestKey is what the request table remembers a request id under. The
// principal comes last and only when there is one, so that the keys of
// requests without a principal are those older builds wrote (lock, holder
// and request id never contain NUL: names, and printable API strings).
func RequestKey(lock, holder, id, principal string) string {
	k := lock + "\x00" + holder + "\x00" + id
	if principal != "" {
		k += "\x00" + principal
	}
	return k
}

// Table is the held locks by name (an index, see index.go), and how many
// each holder holds (derived, not snapshotted).
type Table struct {
	locks    index
	byHolder map[string]int
}

// New returns an empty table sized for n locks.
func New(n int) *Table {
	return &Table{locks: newIndex(n), byHolder: map[string]int{}}
}

// Get returns the held grant of lock name.
func (t *Table) Get(name string) (*Entry, bool) { return t.locks.get(name) }

// Add puts a grant of a lock that is not held in the table.
func (t *Table) Add(e *Entry) {
	t.locks.put(e)
	t.byHolder[e.Holder()]++
}

// Replace puts e in the place of the held grant it changes (same lock,
// same holder).
func (t *Table) Replace(e *Entry) { t.locks.put(e) }

// Remove frees e's lock.
func (t *Table) Remove(e *Entry) {
	t.locks.remove(e.Name())
	if t.byHolder[e.Holder()]--; t.byHolder[e.Holder()] <= 0 {
		delete(t.byHolder, e.Holder())
	}
}

// Len counts the held locks.
func (t *Table) Len() int { return t.locks.n }

// HeldBy counts the locks holder holds.
func (t *Table) HeldBy(holder string) int { return t.byHolder[holder] }

// Entries returns the held grants in no order: one pointer each, the
// entries shared, so that a caller sorts them (Sort) outside the FSM's
// lock.
func (t *Table) Entries() []*Entry {
	out := make([]*Entry, 0, t.locks.n)
	for _, e := range t.locks.entries {
		if e != nil {
			out = append(out, e)
		}
	}
	return out
}

// Sort sorts entries by lock name.
func Sort(entries []*Entry) {
	slices.SortFunc(entries, func(a, b *Entry) int { return strings.Compare(a.Name(), b.Name()) })
}
