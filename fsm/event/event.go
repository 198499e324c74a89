// Package event is what an applied entry changed, as every replica of the
// state machine reports it: the event types, the event record, and the
// Observer the FSM reports them to.
//
// Events are derived from applied entries only, so every replica that
// applies the same log produces the same events; an event's index is the
// log index of the entry that produced it.
package event

// The types of events. They are also the types of GET /v1/events, which
// api/wire spells again: the edge passes Type through as it is, and the two
// cannot share one definition, since fsm knows nothing of HTTP and the
// contract imports nothing of fencer. TestTypesAreTheContracts keeps them
// equal.
const (
	Acquired      = "acquired"
	Released      = "released"
	Expired       = "expired"
	HandedOff     = "handed_off"
	Voided        = "voided"
	Put           = "put"
	KeyDeleted    = "key_deleted"
	MemberAdded   = "member_added"
	MemberRemoved = "member_removed"
	Epoch         = "epoch"
	// ValueSet: a held lock's published value changed (an election's
	// Proclaim); the token is the grant's, unchanged.
	ValueSet = "value_set"
	// Semaphore permits: a permit granted, released, expired, or freed and
	// handed to the head waiter in the same entry. They name the semaphore
	// (never a lock) and carry its limit and the permits held once the entry
	// is applied.
	PermitAcquired  = "permit_acquired"
	PermitReleased  = "permit_released"
	PermitExpired   = "permit_expired"
	PermitHandedOff = "permit_handed_off"
	// Sessions: opened, and ended by expiry or close, every grant under
	// it ending in the same entry with an event of its own.
	SessionCreated = "session_created"
	SessionExpired = "session_expired"
	SessionClosed  = "session_closed"
	// Revoked: an operator ended a grant (a lock's, or a permit's: then
	// Semaphore is set), or a session (Session alone), whose every grant
	// ends with an event of its own in the same entry. A grant whose name
	// went to a waiter in that entry is handed_off (or permit_handed_off)
	// with reason revoked instead.
	Revoked = "revoked"
	// Durable waiters: Queued when one is enqueued, Dequeued when its wait
	// ran out (Lock, or Semaphore; Holder; WaitIndex its Enqueue's index).
	// A durable waiter's grant is the ordinary acquired or handed_off.
	Queued   = "queued"
	Dequeued = "dequeued"
)

// Event is one change an applied entry made. Fields a type does not use are
// zero.
type Event struct {
	Index uint64
	Type  string
	Lock  string // acquired, released, expired, handed_off, voided
	// Holder and Token are the grant's; for handed_off, the new grant's.
	Holder string
	Token  uint64
	// PrevHolder and PrevToken are the ended grant of a handed_off, and
	// Reason how it ended (released, expired or revoked).
	PrevHolder string
	PrevToken  uint64
	Reason     string
	Key        string // put, key_deleted (Token is then the mark it had)
	ValueSize  int    // put: the value's length, never the value
	Member     string // member_added, member_removed
	Epoch      uint64 // epoch
	// Value is the grant's published value on acquired, handed_off and
	// value_set (elections).
	Value string
	// Semaphore, Limit and Held are a permit event's semaphore, its limit
	// and the permits held after the entry.
	Semaphore string
	Limit     int
	Held      int
	// Session is a session event's session, and the session a grant's
	// event's grant lives under.
	Session uint64
	// Mode is entry.ModeShared on the events of a lock's shared grant
	// (acquired, released, expired, handed_off: the new grant's).
	Mode string
	// WaitIndex is a durable waiter's Enqueue index (queued, dequeued).
	WaitIndex uint64
}

// Observer is told what each applied entry changed, in log order, on every
// replica. It is called under the FSM's lock, so it must be quick and must
// not call back into the FSM; events is empty for entries that changed
// nothing observable (and for Raft's own entries), so that the observer
// knows how far the log has been applied.
type Observer interface {
	// Applied reports the events of the entry at index.
	Applied(index uint64, events []Event)
	// Restored reports that the state was replaced by a snapshot whose
	// applied index is index: at startup (boot true), when a follower
	// catches up from its leader's snapshot, or by a restore, whose voided
	// grants and new epoch are the events.
	Restored(index uint64, boot bool, events []Event)
}
