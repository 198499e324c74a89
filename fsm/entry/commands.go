package entry

import "encoding/json"

// The commands of the coordination primitives beside locks (LogFormatCoord)
// and the records that commands carry.

// Member is a cluster member's identity and addresses.
type Member struct {
	ID       string `json:"id"`
	RaftAddr string `json:"raft_addr"`
	HTTPAddr string `json:"http_addr"`
	// Incarnation identifies one life of the member's data dir: a new one
	// is drawn when the dir is created, so a wiped disk is recognized.
	Incarnation string `json:"incarnation,omitempty"`
	// LogFormat is the newest entry encoding the member's build reads
	// (LogFormatJSON when it registered before formats were recorded).
	LogFormat int `json:"log_format,omitempty"`
	// Key is the public half of the member's own key
	// (wire.MemberKeyString), with which it signs what it asks of the
	// others; "" for a member that registered none (an older build, or
	// one an operator added and that has not registered since). A
	// set-member with a key is LogFormatMemberKey; a snapshot with one is
	// version 4.
	Key string `json:"key,omitempty"`
}

// EndDelay ends the lock-delay started at index Since, and when Next is set
// grants the lock to it in the same entry, so a waiter that waited through
// the delay gets the lock with no gap in which anybody else could.
type EndDelay struct {
	Lock  string   `json:"lock"`
	Since uint64   `json:"since"`
	Next  *Acquire `json:"next,omitempty"`
	// Semaphore, instead of Lock, ends the delay of one of its permit slots,
	// handing the slot to NextPermit (LogFormatPermitDelay).
	Semaphore  string      `json:"semaphore,omitempty"`
	NextPermit *SemAcquire `json:"next_permit,omitempty"`
}

// SemAcquire grants a permit if the semaphore has one free.
type SemAcquire struct {
	Semaphore string `json:"semaphore"`
	Holder    string `json:"holder"`
	Lease     string `json:"lease"`
	TTLMillis int64  `json:"ttl_ms"`
	Limit     int    `json:"limit"`
	RequestID string `json:"request_id,omitempty"`
	NowMillis int64  `json:"now_ms,omitempty"`
	Principal string `json:"principal,omitempty"`
	// LockDelayMillis, when set, keeps the permit's slot from being
	// granted again for that long if the permit expires (LogFormatPermitDelay).
	LockDelayMillis int64 `json:"lock_delay_ms,omitempty"`
	// Session and SessionLease put the permit under a live session, as
	// Acquire's (LogFormatSession).
	Session      uint64 `json:"session,omitempty"`
	SessionLease string `json:"session_lease,omitempty"`
}

// SemRelease ends a permit, if Lease is its secret, and hands a permit to
// Next in the same entry.
type SemRelease struct {
	Semaphore string      `json:"semaphore"`
	Token     uint64      `json:"token"`
	Lease     string      `json:"lease"`
	Next      *SemAcquire `json:"next,omitempty"`
}

// SemExpire ends a permit whose lease ran out on the leader; it does nothing
// when the permit is no longer held.
type SemExpire struct {
	Semaphore string      `json:"semaphore"`
	Token     uint64      `json:"token"`
	Next      *SemAcquire `json:"next,omitempty"`
}

func (*SemAcquire) Type() CommandType { return CmdSemAcquire }
func (*SemRelease) Type() CommandType { return CmdSemRelease }
func (*SemExpire) Type() CommandType  { return CmdSemExpire }

// SetValue changes the value a held lock's grant publishes (an election's
// Proclaim), if Token and Lease are its current grant's; the token does not
// change.
type SetValue struct {
	Lock  string `json:"lock"`
	Token uint64 `json:"token"`
	Lease string `json:"lease"`
	Value string `json:"value"`
}

func (*SetValue) Type() CommandType { return CmdSetValue }

// acquireFields is Acquire without its methods, for its JSON.
type acquireFields Acquire

// acquireWithPrincipal is the JSON of an acquire with a lock-delay or a
// value (fieldsFormat): only
// members of LogFormatCoord are ever sent one, and they read the principal,
// so unlike older JSON acquires it carries it.
type acquireWithPrincipal struct {
	*acquireFields
	Principal string `json:"principal,omitempty"`
}

// MarshalJSON writes the principal only in an acquire with a lock-delay.
func (c *Acquire) MarshalJSON() ([]byte, error) {
	if fieldsFormat(c) < LogFormatCoord {
		return json.Marshal((*acquireFields)(c))
	}
	return json.Marshal(acquireWithPrincipal{(*acquireFields)(c), c.Principal})
}

// UnmarshalJSON reads the principal only in an acquire with a lock-delay:
// in any other JSON acquire it would be something no build wrote.
func (c *Acquire) UnmarshalJSON(b []byte) error {
	w := acquireWithPrincipal{acquireFields: (*acquireFields)(c)}
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	c.Principal = ""
	if fieldsFormat(c) >= LogFormatCoord {
		c.Principal = w.Principal
	}
	return nil
}
