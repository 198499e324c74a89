package entry

import (
	"encoding/binary"
	"errors"
	"fmt"
	"unicode/utf8"
)

// The commands of every lock cycle (acquire, release, expire, fenced put)
// are written in a compact binary form; the rare ones stay JSON. Decoding
// JSON was a tenth of a follower's CPU under load (by profile), and the
// binary entries are less than half the size.
//
// They have type bytes of their own, so an entry written before this
// encoding existed (types 1–4, JSON) still decodes as it always did, and a
// node too old to know these types stops with UnknownCommandError instead
// of skipping what the others apply.
//
// Layout: strings (UTF-8) and byte strings are a uvarint length then the bytes;
// tokens are uvarints; TTL and clock readings are varints; a release's or
// expiry's hand-off is one byte (0: none, 1: an acquire body follows).
// Nothing may follow the last field.
//
// The forms of LogFormatPrincipal (types 14-17) are the same layouts with
// the principal appended to every acquire body (a hand-off's too) and to the
// put; a put of that form also applies the unissued-token rule.

// Log formats: what a build can read. Each member records its own (Member),
// and the leader writes the binary types only once every member of the
// configuration has recorded LogFormatBinary, so that a rolling upgrade
// never feeds an entry to a member too old to decode it.
const (
	LogFormatJSON   = 0 // types 1-8 only, every payload JSON
	LogFormatBinary = 1 // also types 9-12
	// LogFormatPrincipal also reads types 13-17: key deletes, lock-cycle
	// entries that carry the caller's principal, and puts that refuse
	// unissued tokens.
	LogFormatPrincipal = 2
	// LogFormatCoord also reads types 18-22 (the end of a lock-delay,
	// semaphores, lock values) and the acquire fields lock_delay_ms and
	// value.
	LogFormatCoord = 3
	// LogFormatHistory also reads type 23 (the grant history's settings).
	LogFormatHistory = 4
	// LogFormatPermitDelay also reads lock_delay_ms on semaphore acquires
	// and the end of a permit slot's delay (end-delay's semaphore and
	// next_permit).
	LogFormatPermitDelay = 5
	// LogFormatPermitHistory also reads set-grant-history's permits: the
	// grant history then records semaphore permits beside lock grants.
	LogFormatPermitHistory = 6
	// LogFormatMemberKey also reads set-member's key: the member's public
	// key, with which it signs its requests to the others.
	LogFormatMemberKey = 7
	// LogFormatSession also reads types 26-27 (sessions: their creation
	// and their end) and the acquire fields session and session_lease.
	LogFormatSession = 8
	// LogFormatLockModes also reads the primitives of issue 28: revoke
	// (type 28), multi-lock acquire and release (types 29-30) and the
	// acquire field mode (shared locks).
	LogFormatLockModes = 9
	// LogFormatDurableWaits also reads types 31-32: durable waiters
	// enqueued and dequeued (issue 28).
	LogFormatDurableWaits = 10
	// LogFormatMultiModes also reads multi-acquire's mode (a multi-grant
	// in shared mode): an older build would grant it exclusively.
	LogFormatMultiModes = 11
	// LogFormatMultiSessions also reads multi-acquire's session and
	// multi-release's revoked (a multi-grant under a session; a multi-grant
	// revoked whole).
	LogFormatMultiSessions = 12
	// LogFormat is the newest format this build reads and writes.
	LogFormat = LogFormatMultiSessions
)

// binaryForm is a command's compact form: its type byte, the log format
// that introduced it, and how its payload is read and written. (A form
// that is not binary, set-grant-history's of LogFormatPermitHistory, is one
// too: its name is its tag.)
type binaryForm struct {
	typ    CommandType
	format int
	read   func(payload []byte) (Command, error)
	append func(b []byte, cmd Command) []byte
	tag    string // its label, when not binary
}

// binaryOf makes a binary form of the command type C from its typed reader
// and writer.
func binaryOf[C Command](typ CommandType, format int, read func([]byte) (C, error), write func([]byte, C) []byte) *binaryForm {
	return &binaryForm{
		typ:    typ,
		format: format,
		read:   func(payload []byte) (Command, error) { return read(payload) },
		append: func(b []byte, cmd Command) []byte { return write(b, cmd.(C)) },
	}
}

// formOf is binaryOf for a form with a tag of its own.
func formOf[C Command](typ CommandType, format int, tag string, read func([]byte) (C, error), write func([]byte, C) []byte) *binaryForm {
	f := binaryOf(typ, format, read, write)
	f.tag = tag
	return f
}

// label names the form in CommandType.String.
func (f *binaryForm) label() string {
	if f.tag != "" {
		return f.tag
	}
	if f.format >= LogFormatPrincipal {
		return "principal"
	}
	return "binary"
}

// decode parses a payload of this form.
func (f *binaryForm) decode(payload []byte) (Command, error) {
	cmd, err := f.read(payload)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrMalformedCommand, f.typ, err)
	}
	return cmd, nil
}

// layout is a binary form's field list: the forms of LogFormatPrincipal
// end every acquire body (a hand-off's too) and every put with the
// principal, the older ones have none.
type layout bool

const (
	plainLayout     layout = false // types 9-12
	principalLayout layout = true  // types 14-17
)

func (l layout) appendAcquire(b []byte, a *Acquire) []byte {
	b = appendString(b, a.Lock)
	b = appendString(b, a.Holder)
	b = appendString(b, a.Lease)
	b = binary.AppendVarint(b, a.TTLMillis)
	b = appendString(b, a.RequestID)
	b = binary.AppendVarint(b, a.NowMillis)
	if l == principalLayout {
		b = appendString(b, a.Principal)
	}
	return b
}

// The readers each keep their reader on the stack: a reader passed through
// the table's function values would escape, one allocation per entry.

func (l layout) readAcquire(p []byte) (*Acquire, error) {
	r := reader{b: p, layout: l}
	a := &Acquire{}
	r.acquire(a)
	return a, r.done()
}

func (l layout) appendRelease(b []byte, c *Release) []byte {
	b = appendString(b, c.Lock)
	b = binary.AppendUvarint(b, c.Token)
	b = appendString(b, c.Lease)
	return l.appendNext(b, c.Next)
}

func (l layout) readRelease(p []byte) (*Release, error) {
	r := reader{b: p, layout: l}
	c := &Release{Lock: r.string(), Token: r.uvarint(), Lease: r.string()}
	c.Next = r.next()
	return c, r.done()
}

func (l layout) appendExpire(b []byte, c *Expire) []byte {
	b = appendString(b, c.Lock)
	b = binary.AppendUvarint(b, c.Token)
	return l.appendNext(b, c.Next)
}

func (l layout) readExpire(p []byte) (*Expire, error) {
	r := reader{b: p, layout: l}
	c := &Expire{Lock: r.string(), Token: r.uvarint()}
	c.Next = r.next()
	return c, r.done()
}

func (l layout) appendPut(b []byte, c *Put) []byte {
	b = appendString(b, c.Key)
	b = appendBytes(b, c.Value)
	b = binary.AppendUvarint(b, c.Token)
	b = appendString(b, c.Lock)
	if l == principalLayout {
		b = appendString(b, c.Principal)
	}
	return b
}

func (l layout) readPut(p []byte) (*Put, error) {
	r := reader{b: p, layout: l}
	c := &Put{Key: r.string(), Value: r.bytes(), Token: r.uvarint(), Lock: r.string()}
	if l == principalLayout {
		c.Principal = r.string()
		c.issuedOnly = true
	}
	return c, r.done()
}

func (l layout) appendNext(b []byte, next *Acquire) []byte {
	if next == nil {
		return append(b, 0)
	}
	return l.appendAcquire(append(b, 1), next)
}

func appendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

func appendBytes(b []byte, p []byte) []byte {
	b = binary.AppendUvarint(b, uint64(len(p)))
	return append(b, p...)
}

// reader consumes a binary payload; the first error sticks and every later
// read returns a zero value.
type reader struct {
	b      []byte
	err    error
	layout layout
}

var errTruncated = errors.New("truncated")

// done returns the first error, or an error if bytes follow the last field.
func (r *reader) done() error {
	if r.err == nil && len(r.b) > 0 {
		return fmt.Errorf("%d bytes after the last field", len(r.b))
	}
	return r.err
}

func (r *reader) uvarint() uint64 { return readVarint(r, binary.Uvarint) }
func (r *reader) varint() int64   { return readVarint(r, binary.Varint) }

func readVarint[T int64 | uint64](r *reader, decode func([]byte) (T, int)) T {
	if r.err != nil {
		return 0
	}
	v, n := decode(r.b)
	switch {
	case n == 0:
		r.err = errTruncated
		return 0
	case n < 0:
		r.err = errors.New("varint overflows 64 bits")
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *reader) raw() []byte {
	n := r.uvarint()
	if r.err != nil {
		return nil
	}
	if n > uint64(len(r.b)) {
		r.err = fmt.Errorf("length %d exceeds the %d bytes left", n, len(r.b))
		return nil
	}
	p := r.b[:n]
	r.b = r.b[n:]
	return p
}

// string refuses bytes that are not UTF-8: every string the API accepts is,
// and snapshots (JSON) could not carry the others faithfully.
func (r *reader) string() string {
	p := r.raw()
	if r.err == nil && !utf8.Valid(p) {
		r.err = errors.New("string is not valid UTF-8")
	}
	return string(p)
}

// bytes copies, so that a command never aliases the log entry it came from.
func (r *reader) bytes() []byte {
	p := r.raw()
	if p == nil {
		return nil
	}
	return append([]byte{}, p...)
}

func (r *reader) acquire(a *Acquire) {
	a.Lock = r.string()
	a.Holder = r.string()
	a.Lease = r.string()
	a.TTLMillis = r.varint()
	a.RequestID = r.string()
	a.NowMillis = r.varint()
	if r.layout == principalLayout {
		a.Principal = r.string()
	}
}

func (r *reader) next() *Acquire {
	if r.err != nil {
		return nil
	}
	if len(r.b) == 0 {
		r.err = errTruncated
		return nil
	}
	flag := r.b[0]
	r.b = r.b[1:]
	switch flag {
	case 0:
		return nil
	case 1:
		a := &Acquire{}
		r.acquire(a)
		return a
	}
	r.err = fmt.Errorf("hand-off flag %d, want 0 or 1", flag)
	return nil
}
