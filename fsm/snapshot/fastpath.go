package snapshot

import (
	"strconv"

	"github.com/fencer-io/fencer/fsm/entry"
)

// Lock records (and the request table's, up to fsm/internal/requests.Max) are
// nearly all of a large snapshot (a million held leases are a million
// lines), and encoding/json spends most of a restore's time and allocations
// on them: reflection, and five strings per lock that the state then copies
// into one. appendLockRecord and parseLockRecord write and read the same
// bytes directly for the common case, plain ASCII strings in the writer's
// own field order, and say when they cannot, so that the caller falls back
// to encoding/json: the format is unchanged and every line either path
// accepts decodes to the same grant.

// appendLockRecord appends l's snapshot line, byte for byte what
// json.Encoder writes for Record{Lock: l}, newline included. It returns
// false, with dst unchanged in length, when a string holds a byte
// encoding/json would escape (or non-ASCII, which it may).
func appendLockRecord(dst []byte, l *entry.Lock) ([]byte, bool) {
	w := lineWriter{b: dst, ok: true}
	w.str(`{"lock":{"name":"`, l.Name)
	w.str(`,"holder":"`, l.Holder)
	w.uint(`,"token":`, l.Token)
	w.str(`,"lease":"`, l.Lease)
	w.int(`,"ttl_ms":`, l.TTLMillis)
	if l.RequestID != "" {
		w.str(`,"request_id":"`, l.RequestID)
	}
	if l.GrantedAtMillis != 0 {
		w.int(`,"granted_at_ms":`, l.GrantedAtMillis)
	}
	if l.Principal != "" {
		w.str(`,"principal":"`, l.Principal)
	}
	if l.LockDelayMillis != 0 {
		w.int(`,"lock_delay_ms":`, l.LockDelayMillis)
	}
	if l.Value != "" {
		w.str(`,"value":"`, l.Value)
	}
	if l.Session != 0 {
		w.uint(`,"session":`, l.Session)
	}
	return w.end(len(dst))
}

// lineWriter appends a record's line as json.Encoder writes it, a field at
// a time (appendLockRecord, appendGrantRecord). ok turns false at the
// first string encoding/json would write otherwise (an escape, or
// non-ASCII, which it may escape), and the line is then left to it.
type lineWriter struct {
	b  []byte
	ok bool
}

// str appends key, which ends with the string's opening quote, then v and
// its closing quote.
func (w *lineWriter) str(key, v string) {
	if !w.ok {
		return
	}
	for i := 0; i < len(v); i++ {
		if c := v[i]; c < 0x20 || c >= 0x80 || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			w.ok = false
			return
		}
	}
	w.b = append(append(append(w.b, key...), v...), '"')
}

func (w *lineWriter) uint(key string, v uint64) { w.b = strconv.AppendUint(append(w.b, key...), v, 10) }

func (w *lineWriter) int(key string, v int64) { w.b = strconv.AppendInt(append(w.b, key...), v, 10) }

// end closes the record and its line, or returns the buffer cut back to
// its first n bytes, and false, when encoding/json is to write it.
func (w *lineWriter) end(n int) ([]byte, bool) {
	if !w.ok {
		return w.b[:n], false
	}
	return append(w.b, "}}\n"...), true
}

// LockRecord is a lock record as Decode hands it over: the fields of an
// entry.Lock, its strings as bytes that are valid only until the callback
// returns, so that the state copies them once, into its own layout.
type LockRecord struct {
	Name, Holder, Lease, RequestID, Principal, Value []byte
	Token, Session                                   uint64
	TTLMillis, GrantedAtMillis, LockDelayMillis      int64
}

// recordOf is l as a LockRecord (for lines encoding/json decoded).
func recordOf(l *entry.Lock) *LockRecord {
	return &LockRecord{
		Name: []byte(l.Name), Holder: []byte(l.Holder), Lease: []byte(l.Lease), RequestID: []byte(l.RequestID),
		Principal: []byte(l.Principal), Value: []byte(l.Value),
		Token: l.Token, TTLMillis: l.TTLMillis, GrantedAtMillis: l.GrantedAtMillis, LockDelayMillis: l.LockDelayMillis,
		Session: l.Session,
	}
}

// Lock returns the record as an entry.Lock, with strings of its own.
func (r *LockRecord) Lock() entry.Lock {
	return entry.Lock{
		Name: string(r.Name), Holder: string(r.Holder), Token: r.Token, Lease: string(r.Lease), TTLMillis: r.TTLMillis,
		RequestID: string(r.RequestID), GrantedAtMillis: r.GrantedAtMillis, Principal: string(r.Principal),
		LockDelayMillis: r.LockDelayMillis, Value: string(r.Value),
	}
}

// parseLockRecord reads a lock line as appendLockRecord writes it (without
// its newline) into r, whose byte fields then point into line. It returns
// false for anything else, including what encoding/json would accept
// differently (escapes, non-ASCII, another field order, null, whitespace),
// which the caller then decodes with encoding/json.
func parseLockRecord(line []byte, r *LockRecord) bool {
	p := lockParser{b: line}
	*r = LockRecord{}
	ok := p.lit(`{"lock":{"name":`) && p.str(&r.Name) &&
		p.lit(`,"holder":`) && p.str(&r.Holder) &&
		p.lit(`,"token":`) && p.uint(&r.Token) &&
		p.lit(`,"lease":`) && p.str(&r.Lease) &&
		p.lit(`,"ttl_ms":`) && p.int(&r.TTLMillis)
	if !ok {
		return false
	}
	if p.lit(`,"request_id":`) && !p.str(&r.RequestID) {
		return false
	}
	if p.lit(`,"granted_at_ms":`) && !p.int(&r.GrantedAtMillis) {
		return false
	}
	if p.lit(`,"principal":`) && !p.str(&r.Principal) {
		return false
	}
	if p.lit(`,"lock_delay_ms":`) && !p.int(&r.LockDelayMillis) {
		return false
	}
	if p.lit(`,"value":`) && !p.str(&r.Value) {
		return false
	}
	if p.lit(`,"session":`) && !p.uint(&r.Session) {
		return false
	}
	return p.lit("}}") && len(p.b) == 0
}

// appendRequestRecord appends r's snapshot line as json.Encoder writes
// record{Request: &r}: a request key holds NULs between its parts, which
// encoding/json writes as \u0000. It declines as appendLockRecord does.
func appendRequestRecord(dst []byte, r *entry.RequestRecord) ([]byte, bool) {
	n := len(dst)
	dst = append(dst, `{"request":{"key":"`...)
	for i := 0; i < len(r.Key); i++ {
		switch c := r.Key[i]; {
		case c == 0:
			dst = append(dst, `\u0000`...)
		case c < 0x20 || c >= 0x80 || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&':
			return dst[:n], false
		default:
			dst = append(dst, c)
		}
	}
	dst = strconv.AppendUint(append(dst, `","token":`...), r.Token, 10)
	return append(dst, "}}\n"...), true
}

// parseRequestRecord reads a request line as appendRequestRecord writes it,
// or declines as parseLockRecord does.
func parseRequestRecord(line []byte) (entry.RequestRecord, bool) {
	p := lockParser{b: line}
	if !p.lit(`{"request":{"key":"`) {
		return entry.RequestRecord{}, false
	}
	key := make([]byte, 0, len(p.b))
	for {
		if len(p.b) == 0 {
			return entry.RequestRecord{}, false
		}
		c := p.b[0]
		if c == '"' {
			p.b = p.b[1:]
			break
		}
		if c == '\\' {
			if !p.lit(`\u0000`) {
				return entry.RequestRecord{}, false
			}
			key = append(key, 0)
			continue
		}
		if c < 0x20 || c >= 0x80 {
			return entry.RequestRecord{}, false
		}
		key = append(key, c)
		p.b = p.b[1:]
	}
	var token uint64
	if !p.lit(`,"token":`) || !p.uint(&token) || !p.lit("}}") || len(p.b) != 0 {
		return entry.RequestRecord{}, false
	}
	return entry.RequestRecord{Key: string(key), Token: token}, true
}

// lockParser consumes a line from the front.
type lockParser struct{ b []byte }

func (p *lockParser) lit(s string) bool {
	if len(p.b) < len(s) || string(p.b[:len(s)]) != s {
		return false
	}
	p.b = p.b[len(s):]
	return true
}

// str reads a JSON string of printable ASCII without escapes.
func (p *lockParser) str(out *[]byte) bool {
	if len(p.b) == 0 || p.b[0] != '"' {
		return false
	}
	for i := 1; i < len(p.b); i++ {
		switch c := p.b[i]; {
		case c == '"':
			*out = p.b[1:i]
			p.b = p.b[i+1:]
			return true
		case c < 0x20 || c >= 0x80 || c == '\\':
			return false
		}
	}
	return false
}

// digits reads a JSON integer without sign: 0, or digits without a leading
// zero.
func (p *lockParser) digits() ([]byte, bool) {
	i := 0
	for i < len(p.b) && p.b[i] >= '0' && p.b[i] <= '9' {
		i++
	}
	if i == 0 || (i > 1 && p.b[0] == '0') {
		return nil, false
	}
	d := p.b[:i]
	p.b = p.b[i:]
	return d, true
}

func (p *lockParser) uint(out *uint64) bool {
	d, ok := p.digits()
	if !ok {
		return false
	}
	v, err := strconv.ParseUint(string(d), 10, 64)
	*out = v
	return err == nil
}

// int reads a non-negative int64; a negative one goes to encoding/json.
func (p *lockParser) int(out *int64) bool {
	d, ok := p.digits()
	if !ok {
		return false
	}
	v, err := strconv.ParseInt(string(d), 10, 64)
	*out = v
	return err == nil
}
