package entry

import (
	"encoding/json"
	"fmt"
)

// CommandType is the first byte of every log entry. Types are only ever
// appended; a number, once used, keeps its meaning forever.
type CommandType uint8

const (
	CmdAcquire      CommandType = 1
	CmdRelease      CommandType = 2
	CmdExpire       CommandType = 3
	CmdPut          CommandType = 4
	CmdSetMember    CommandType = 5
	CmdRemoveMember CommandType = 6
	CmdBumpEpoch    CommandType = 7
	CmdSetClusterID CommandType = 8
	// The compact forms of the lock-cycle commands (binary.go). A command's
	// Type is always its JSON type; these only start entries.
	CmdAcquireBinary CommandType = 9
	CmdReleaseBinary CommandType = 10
	CmdExpireBinary  CommandType = 11
	CmdPutBinary     CommandType = 12
	// CmdDeleteKey removes a fenced key and its mark (LogFormatPrincipal).
	CmdDeleteKey CommandType = 13
	// The forms of LogFormatPrincipal (binary.go): the lock-cycle commands
	// with the caller's principal, and the fenced put that refuses a token
	// nobody was issued.
	CmdAcquirePrincipal CommandType = 14
	CmdReleasePrincipal CommandType = 15
	CmdExpirePrincipal  CommandType = 16
	CmdPutPrincipal     CommandType = 17
	// Types of LogFormatCoord (delay.go): the end of a lock-delay.
	CmdEndDelay CommandType = 18
	// Semaphores (semaphore.go), also LogFormatCoord.
	CmdSemAcquire CommandType = 19
	CmdSemRelease CommandType = 20
	CmdSemExpire  CommandType = 21
	// CmdSetValue changes a held lock's published value (LogFormatCoord).
	CmdSetValue CommandType = 22
	// CmdSetGrantHistory fixes (or changes) the cluster's grant history
	// settings (fsm/history.go; LogFormatHistory).
	CmdSetGrantHistory CommandType = 23
	// CmdSetGrantHistoryPermits is set-grant-history's form of
	// LogFormatPermitHistory, which carries its permits setting.
	CmdSetGrantHistoryPermits CommandType = 24
	// CmdSetMemberKey is set-member's form of LogFormatMemberKey, which
	// carries the member's key: under type 5 an older build decoded it,
	// dropped the key without a word and diverged (its snapshot then lost
	// every key); under a type it does not know it stops instead.
	CmdSetMemberKey CommandType = 25
	// Sessions (session.go; LogFormatSession): one lease for many grants.
	CmdSessionCreate CommandType = 26
	CmdSessionEnd    CommandType = 27
	// CmdRevoke ends a grant or a session at an operator's word (revoke.go;
	// LogFormatLockModes).
	CmdRevoke CommandType = 28
	// Multi-locks (multilock.go; LogFormatLockModes): one grant over
	// several names.
	CmdMultiAcquire CommandType = 29
	CmdMultiRelease CommandType = 30
	// Durable waiters (durable.go; LogFormatDurableWaits): a waiter's
	// place in its name's queue, kept in the log.
	CmdEnqueue CommandType = 31
	CmdDequeue CommandType = 32
)

// Command is one FSM operation. Everything the FSM needs is inside it: the
// leader chooses secrets and timestamps before proposing.
type Command interface {
	// Type is the command's row in the commands table.
	Type() CommandType
}

// commandSpec is one row of the commands table.
type commandSpec struct {
	typ  CommandType // the command's Type, and the type byte of its JSON form
	name string
	// empty returns a zero command for a JSON payload to fill.
	empty func() Command
	// forms are the command's other forms (compact ones, or one that
	// carries a newer field), oldest log format first; the newest one the
	// members read and the command's fields allow is written (none: JSON).
	forms []*binaryForm
	// since is the log format that introduced the command: it is never
	// encoded for members that read less.
	since int
}

// form returns the form a command whose fields need log format fields
// (fieldsFormat) is written in for members that read format: nil for JSON.
// A form carries the fields of its format and older ones (the binary forms
// none of LogFormatCoord's: such a command is JSON), and a form that is
// not binary is written only for the field it exists to carry.
func (s *commandSpec) form(format, fields int) *binaryForm {
	var f *binaryForm
	for _, b := range s.forms {
		if b.format <= format && fields <= b.format && (b.tag == "" || fields == b.format) {
			f = b
		}
	}
	return f
}

// commands is every command this build knows. Adding one takes a type byte
// above, a struct with Type and apply methods, and a row here (with a binary
// form if it is frequent enough to matter); Decode, Encode and String read
// nothing else. A new type byte stops any member whose build predates it, so
// proposing it must wait until every member records a log format that reads
// it (see DESIGN.md).
var commands = []commandSpec{
	{typ: CmdAcquire, name: "acquire", empty: func() Command { return &Acquire{} }, forms: []*binaryForm{
		binaryOf(CmdAcquireBinary, LogFormatBinary, plainLayout.readAcquire, plainLayout.appendAcquire),
		binaryOf(CmdAcquirePrincipal, LogFormatPrincipal, principalLayout.readAcquire, principalLayout.appendAcquire)}},
	{typ: CmdRelease, name: "release", empty: func() Command { return &Release{} }, forms: []*binaryForm{
		binaryOf(CmdReleaseBinary, LogFormatBinary, plainLayout.readRelease, plainLayout.appendRelease),
		binaryOf(CmdReleasePrincipal, LogFormatPrincipal, principalLayout.readRelease, principalLayout.appendRelease)}},
	{typ: CmdExpire, name: "expire", empty: func() Command { return &Expire{} }, forms: []*binaryForm{
		binaryOf(CmdExpireBinary, LogFormatBinary, plainLayout.readExpire, plainLayout.appendExpire),
		binaryOf(CmdExpirePrincipal, LogFormatPrincipal, principalLayout.readExpire, principalLayout.appendExpire)}},
	{typ: CmdPut, name: "put", empty: func() Command { return &Put{} }, forms: []*binaryForm{
		binaryOf(CmdPutBinary, LogFormatBinary, plainLayout.readPut, plainLayout.appendPut),
		binaryOf(CmdPutPrincipal, LogFormatPrincipal, principalLayout.readPut, principalLayout.appendPut)}},
	{typ: CmdSetMember, name: "set-member", empty: func() Command { return &SetMember{} }, forms: []*binaryForm{
		formOf(CmdSetMemberKey, LogFormatMemberKey, "key", readKeyedMember, appendKeyedMember)}},
	{typ: CmdRemoveMember, name: "remove-member", empty: func() Command { return &RemoveMember{} }},
	{typ: CmdBumpEpoch, name: "bump-epoch", empty: func() Command { return &BumpEpoch{} }},
	{typ: CmdSetClusterID, name: "set-cluster-id", empty: func() Command { return &SetClusterID{} }},
	{typ: CmdDeleteKey, name: "delete-key", empty: func() Command { return &DeleteKey{} }, since: LogFormatPrincipal},
	{typ: CmdEndDelay, name: "end-delay", empty: func() Command { return &EndDelay{} }, since: LogFormatCoord},
	{typ: CmdSemAcquire, name: "sem-acquire", empty: func() Command { return &SemAcquire{} }, since: LogFormatCoord},
	{typ: CmdSemRelease, name: "sem-release", empty: func() Command { return &SemRelease{} }, since: LogFormatCoord},
	{typ: CmdSemExpire, name: "sem-expire", empty: func() Command { return &SemExpire{} }, since: LogFormatCoord},
	{typ: CmdSetValue, name: "set-value", empty: func() Command { return &SetValue{} }, since: LogFormatCoord},
	{typ: CmdSetGrantHistory, name: "set-grant-history", empty: func() Command { return &SetGrantHistory{} }, since: LogFormatHistory, forms: []*binaryForm{
		formOf(CmdSetGrantHistoryPermits, LogFormatPermitHistory, "permits", readPermitHistory, appendPermitHistory)}},
	{typ: CmdSessionCreate, name: "session-create", empty: func() Command { return &SessionCreate{} }, since: LogFormatSession},
	{typ: CmdSessionEnd, name: "session-end", empty: func() Command { return &SessionEnd{} }, since: LogFormatSession},
	{typ: CmdMultiAcquire, name: "multi-acquire", empty: func() Command { return &MultiAcquire{} }, since: LogFormatLockModes},
	{typ: CmdMultiRelease, name: "multi-release", empty: func() Command { return &MultiRelease{} }, since: LogFormatLockModes},
	{typ: CmdRevoke, name: "revoke", empty: func() Command { return &Revoke{} }, since: LogFormatLockModes},
	{typ: CmdEnqueue, name: "enqueue", empty: func() Command { return &Enqueue{} }, since: LogFormatDurableWaits},
	{typ: CmdDequeue, name: "dequeue", empty: func() Command { return &Dequeue{} }, since: LogFormatDurableWaits},
}

// Types returns the Type of every command this build knows, in table order.
func Types() []CommandType {
	out := make([]CommandType, len(commands))
	for i := range commands {
		out[i] = commands[i].typ
	}
	return out
}

// New returns a zero command of Type t, nil if t is not a command's Type.
func New(t CommandType) Command {
	if k := kinds[t]; k.spec != nil && k.form == nil {
		return k.spec.empty()
	}
	return nil
}

// entryKind is what a type byte starts: a command's JSON or binary form.
type entryKind struct {
	spec *commandSpec // nil: a type byte this build does not know
	form *binaryForm  // nil: the JSON form
}

// kinds indexes the commands table by type byte.
var kinds = indexCommands(commands)

func indexCommands(specs []commandSpec) *[256]entryKind {
	var idx [256]entryKind
	claim := func(t CommandType, k entryKind) {
		if idx[t].spec != nil {
			panic(fmt.Sprintf("fsm/entry: type byte %d is in the commands table twice", t))
		}
		idx[t] = k
	}
	for i := range specs {
		s := &specs[i]
		claim(s.typ, entryKind{spec: s})
		for _, f := range s.forms {
			claim(f.typ, entryKind{spec: s, form: f})
		}
	}
	return &idx
}

func (t CommandType) String() string {
	switch k := kinds[t]; {
	case k.spec == nil:
		return fmt.Sprintf("unknown(%d)", uint8(t))
	case k.form != nil:
		return k.spec.name + "(" + k.form.label() + ")"
	default:
		return k.spec.name
	}
}

// Logical maps a type byte to the Type of the command its entry carries.
func (t CommandType) Logical() CommandType {
	if k := kinds[t]; k.spec != nil {
		return k.spec.typ
	}
	return t
}

// Acquire grants a free lock. Its token is the log index of the entry that
// carries it (with the epoch in the high bits).
type Acquire struct {
	Lock   string `json:"lock"`
	Holder string `json:"holder"`
	// Lease is the grant's secret, chosen by the leader.
	Lease string `json:"lease"`
	// TTLMillis is the length of the grant's lease.
	TTLMillis int64  `json:"ttl_ms"`
	RequestID string `json:"request_id,omitempty"`
	// NowMillis is the proposing leader's wall clock. It is recorded for
	// operators and never used in a decision.
	NowMillis int64 `json:"now_ms,omitempty"`
	// Principal is the authenticated caller ("" without an ACL). The
	// request id is remembered for this principal only, so another one
	// replaying it is a new request. Only the forms of LogFormatPrincipal
	// carry it: a JSON entry never does, as older builds would drop it.
	Principal string `json:"-"`
	// LockDelayMillis, when set, keeps the lock from being granted again
	// for that long after this grant ends by expiry (LogFormatCoord: such
	// an acquire is always JSON, and its JSON carries the principal).
	LockDelayMillis int64 `json:"lock_delay_ms,omitempty"`
	// Value is published with the grant (elections; LogFormatCoord, JSON
	// only, as LockDelayMillis).
	Value string `json:"value,omitempty"`
	// Session, with its secret SessionLease, puts the grant under a live
	// session (LogFormatSession, JSON only): it lives as long as the
	// session, whose TTL it takes.
	Session      uint64 `json:"session,omitempty"`
	SessionLease string `json:"session_lease,omitempty"`
	// Mode is ModeShared for a shared grant, "" for an exclusive one
	// (LogFormatLockModes, JSON only, as LockDelayMillis).
	Mode string `json:"mode,omitempty"`
}

// The modes of a lock's grant. An exclusive grant's Mode is "" in the log
// and the state, so that every entry and record without one means what it
// always did; ModeExclusive is its name at the edge.
const (
	ModeShared    = "shared"
	ModeExclusive = "exclusive"
)

// Release ends the grant of a lock with Token, if Lease is its secret. When
// Next is set and the release succeeds, the lock is granted to Next in the
// same entry, so a queued waiter gets it with no gap in which anybody else
// could.
type Release struct {
	Lock  string   `json:"lock"`
	Token uint64   `json:"token"`
	Lease string   `json:"lease"` // the grant's secret
	Next  *Acquire `json:"next,omitempty"`
}

// Expire ends a grant whose lease ran out on the leader. It does nothing when
// Token is no longer the lock's current token.
type Expire struct {
	Lock  string   `json:"lock"`
	Token uint64   `json:"token"`
	Next  *Acquire `json:"next,omitempty"`
}

// Put stores a value under a fenced key if Token is greater than the key's
// last token, and, when Lock is set, only while Token is that lock's current
// grant. In its LogFormatPrincipal form it also refuses a token above the
// last one ever granted (refusal.ErrUnissuedToken) and records its principal as the
// key's writer.
type Put struct {
	Key   string `json:"key"`
	Value []byte `json:"value"`
	Token uint64 `json:"token"`
	Lock  string `json:"lock,omitempty"`
	// Principal is the authenticated writer ("" without an ACL), whose
	// share of the store the key counts in (see fsm.FSM.KVUsage).
	Principal string `json:"-"`
	// issuedOnly is set by the decoder of the LogFormatPrincipal form: only
	// entries of that form apply the unissued-token rule, so that an entry
	// an older leader wrote applies alike on members old and new.
	issuedOnly bool
}

// IssuedOnly reports whether the put applies the unissued-token rule: only
// a put decoded from its LogFormatPrincipal form does.
func (c *Put) IssuedOnly() bool { return c.issuedOnly }

// DeleteKey removes a fenced key and its high-water mark, so that the next
// fenced write to it is accepted whatever its token: an operator's way out
// of a mark that no holder can pass.
type DeleteKey struct {
	Key string `json:"key"`
}

// SetMember records a member's addresses so that any node can reach any
// other node's HTTP API (to forward to the leader).
type SetMember struct {
	Member
}

// RemoveMember forgets a member's addresses.
type RemoveMember struct {
	ID string `json:"id"`
}

// BumpEpoch moves every future token above every token of the previous epoch.
// No build has proposed it: a restore sets the epoch in the snapshot it
// installs, and a forced recovery sets it in the snapshot it writes
// (cluster/recovery), because neither can wait for a log entry. It stays
// decodable, and type 7 stays taken.
type BumpEpoch struct {
	Reason string `json:"reason"`
}

// SetClusterID names the cluster once, when its first leader takes office.
// Later ones are ignored: a cluster's id never changes.
type SetClusterID struct {
	ID string `json:"id"`
}

func (*Acquire) Type() CommandType      { return CmdAcquire }
func (*EndDelay) Type() CommandType     { return CmdEndDelay }
func (*Release) Type() CommandType      { return CmdRelease }
func (*Expire) Type() CommandType       { return CmdExpire }
func (*Put) Type() CommandType          { return CmdPut }
func (*SetMember) Type() CommandType    { return CmdSetMember }
func (*RemoveMember) Type() CommandType { return CmdRemoveMember }
func (*BumpEpoch) Type() CommandType    { return CmdBumpEpoch }
func (*SetClusterID) Type() CommandType { return CmdSetClusterID }
func (*DeleteKey) Type() CommandType    { return CmdDeleteKey }

// Encode returns the log entry for cmd: its type byte, then its payload
// (binary for the commands of a lock cycle, see binary.go; JSON for the
// others).
func Encode(cmd Command) ([]byte, error) { return EncodeFormat(cmd, LogFormat) }

// EncodeFormat is Encode for members that read format: with LogFormatJSON
// every command is written as JSON, as builds before the binary types did.
// A form older than LogFormatPrincipal has no principal, so it is left out;
// a command newer than format is refused (ErrFormatTooOld).
func EncodeFormat(cmd Command, format int) ([]byte, error) {
	k := kinds[cmd.Type()]
	if k.spec == nil || k.form != nil {
		return nil, fmt.Errorf("encode %T: type %d is not in the commands table", cmd, cmd.Type())
	}
	fields := fieldsFormat(cmd)
	if need := max(k.spec.since, fields); format < need {
		return nil, fmt.Errorf("%w: %s needs log format %d, the members read %d", ErrFormatTooOld, k.spec.name, need, format)
	}
	if b := k.spec.form(format, fields); b != nil {
		return b.append(append(make([]byte, 0, 128), byte(b.typ)), cmd), nil
	}
	payload, err := json.Marshal(cmd)
	if err != nil {
		return nil, fmt.Errorf("encode %s: %w", cmd.Type(), err)
	}
	buf := make([]byte, 0, 1+len(payload))
	buf = append(buf, byte(cmd.Type()))
	return append(buf, payload...), nil
}

// UnknownCommandError is returned for a type byte this build does not know.
// It means the entry was written by a newer fencer: skipping it would let this
// replica diverge from the others, so the FSM refuses to go on (see Apply).
type UnknownCommandError struct{ Type CommandType }

func (e *UnknownCommandError) Error() string {
	return fmt.Sprintf("unknown command type %d: this node runs an older fencer than the entry's writer; upgrade it", uint8(e.Type))
}

// Decode parses a log entry. An entry whose type is known but whose payload is
// malformed yields ErrMalformedCommand; an unknown type yields
// *UnknownCommandError.
func Decode(entry []byte) (Command, error) {
	if len(entry) == 0 {
		return nil, fmt.Errorf("%w: empty entry", ErrMalformedCommand)
	}
	t := CommandType(entry[0])
	k := kinds[t]
	switch {
	case k.spec == nil:
		return nil, &UnknownCommandError{Type: t}
	case k.form != nil:
		return k.form.decode(entry[1:])
	}
	cmd := k.spec.empty()
	if err := json.Unmarshal(entry[1:], cmd); err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrMalformedCommand, t, err)
	}
	return cmd, nil
}

// fieldsFormat is the log format a command's fields need beyond its type's:
// the binary forms carry no lock-delay, so an acquire with one (or a
// release or expiry handing off to one) is written as JSON, which only
// members of LogFormatCoord read in full.
func fieldsFormat(cmd Command) int {
	switch c := cmd.(type) {
	case *MultiAcquire:
		if c.Session != 0 || c.SessionLease != "" {
			// An older build would drop the session and time the grant
			// with a TTL of 0: its state would differ from the others'.
			return LogFormatMultiSessions
		}
	case *MultiRelease:
		if c.Revoked {
			return LogFormatMultiSessions
		}
	}
	if c, ok := cmd.(*MultiAcquire); ok && c.Mode != "" {
		return LogFormatMultiModes
	}
	if modeFields(cmd) {
		return LogFormatLockModes
	}
	if sessionFields(cmd) {
		return LogFormatSession
	}
	var next *Acquire
	var permit *SemAcquire
	switch c := cmd.(type) {
	case *SemAcquire:
		permit = c
	case *SemRelease:
		permit = c.Next
	case *SemExpire:
		permit = c.Next
	}
	if permit != nil && permit.LockDelayMillis != 0 {
		return LogFormatPermitDelay
	}
	if c, ok := cmd.(*EndDelay); ok && c.Semaphore != "" {
		return LogFormatPermitDelay
	}
	if c, ok := cmd.(*SetMember); ok && c.Key != "" {
		// An older build would drop the key: its state would differ from
		// the others', and a snapshot it wrote would lose the key.
		return LogFormatMemberKey
	}
	if c, ok := cmd.(*SetGrantHistory); ok && c.Permits {
		// An older build would drop the field and keep no permits: its
		// history would differ from the others' from this entry on.
		return LogFormatPermitHistory
	}
	switch c := cmd.(type) {
	case *Acquire:
		next = c
	case *Release:
		next = c.Next
	case *Expire:
		next = c.Next
	case *EndDelay:
		next = c.Next
	}
	if next != nil && (next.LockDelayMillis != 0 || next.Value != "") {
		return LogFormatCoord
	}
	return LogFormatJSON
}

// modeFields reports whether cmd carries a shared acquire (itself or a
// hand-off), which only members of LogFormatLockModes read: an older build
// would drop the mode and grant the lock exclusively.
func modeFields(cmd Command) bool {
	var next *Acquire
	switch c := cmd.(type) {
	case *Acquire:
		next = c
	case *Release:
		next = c.Next
	case *Expire:
		next = c.Next
	case *EndDelay:
		next = c.Next
	}
	return next != nil && next.Mode != ""
}

// readKeyedMember reads set-member's keyed form: the same JSON as type 5.
func readKeyedMember(payload []byte) (*SetMember, error) {
	var c SetMember
	if err := json.Unmarshal(payload, &c); err != nil {
		return nil, err
	}
	return &c, nil
}

func appendKeyedMember(b []byte, c *SetMember) []byte {
	// A record of strings and an int cannot fail to marshal.
	payload, _ := json.Marshal(c)
	return append(b, payload...)
}
