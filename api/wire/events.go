package wire

// Event types of GET /v1/events. More are added over time: a client skips a
// type it does not know.
//
// fsm/event spells them again for the events the state machine emits,
// which the server passes through as they are: the contract imports nothing
// of fencer and fsm knows nothing of HTTP, so neither can use the other's;
// fsm/event's TestTypesAreTheContracts keeps them equal.
const (
	EventAcquired  = "acquired"
	EventReleased  = "released"
	EventExpired   = "expired"
	EventHandedOff = "handed_off"
	EventVoided    = "voided"
	EventPut       = "put"
	// EventKeyDeleted: a fenced key and its mark were deleted; Token is
	// the mark it had.
	EventKeyDeleted    = "key_deleted"
	EventMemberAdded   = "member_added"
	EventMemberRemoved = "member_removed"
	EventEpoch         = "epoch"
	// EventValueSet: a held lock's published value changed (an election's
	// Proclaim); Token is the grant's, unchanged.
	EventValueSet = "value_set"
	// Semaphore permits: granted, released, expired, or freed and handed
	// to the head waiter in the same entry (Reason says how the previous
	// one ended). They carry Semaphore (never Lock), Limit and Held, the
	// permits held once the entry was applied.
	EventPermitAcquired  = "permit_acquired"
	EventPermitReleased  = "permit_released"
	EventPermitExpired   = "permit_expired"
	EventPermitHandedOff = "permit_handed_off"
	// EventLagged is the last message of a stream whose reader fell too
	// far behind: Index is the last index delivered, to resume from.
	EventLagged = "lagged"
)

// Event is the data of one Server-Sent Event of GET /v1/events. Its SSE id
// is Index, the log index of the entry that made the change; every node
// emits the same events with the same indexes. Fields a type does not use
// are left out.
type Event struct {
	Index uint64 `json:"index"`
	Type  string `json:"type"`
	Lock  string `json:"lock,omitempty"`
	// Holder and Token are the grant's; on handed_off the new grant's.
	Holder string `json:"holder,omitempty"`
	Token  uint64 `json:"token,omitempty"`
	// PrevHolder and PrevToken are the grant a handed_off ended, and Reason
	// how it ended (released or expired).
	PrevHolder string `json:"prev_holder,omitempty"`
	PrevToken  uint64 `json:"prev_token,omitempty"`
	Reason     string `json:"reason,omitempty"`
	Key        string `json:"key,omitempty"`
	// ValueSize is a put's value length; the value itself is never sent.
	ValueSize *int   `json:"value_size,omitempty"`
	Member    string `json:"member,omitempty"`
	Epoch     uint64 `json:"epoch,omitempty"`
	// Value is the grant's published value on acquired, handed_off and
	// value_set (elections).
	Value string `json:"value,omitempty"`
	// Semaphore, Limit and Held are a permit event's semaphore, its limit
	// and the permits held after the change.
	Semaphore string `json:"semaphore,omitempty"`
	Limit     int    `json:"limit,omitempty"`
	Held      *int   `json:"held,omitempty"`
	// Session is the session of a session event, and of a grant held
	// under one (acquired, released, expired, handed_off and the permit
	// events).
	Session uint64 `json:"session,omitempty"`
	// Mode is ModeShared on the events of a lock's shared grant
	// (acquired, released, expired; handed_off: the new grant's); absent
	// for an exclusive one.
	Mode string `json:"mode,omitempty"`
	// WaitIndex is a durable waiter's enqueue index (queued, dequeued).
	WaitIndex uint64 `json:"wait_index,omitempty"`
}
