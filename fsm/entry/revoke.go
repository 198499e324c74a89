package entry

// Revoke ends a grant, or a session and every grant under it, at an
// operator's word (fsm/revoke.go), as an expiry would: a grant's
// lock-delay starts, and a name it frees for a waiter goes to the waiter
// in this entry. Exactly one target is set: Lock or Semaphore with the
// grant's Token, or Session alone. Next hands a freed lock to a waiter,
// NextPermit a freed permit slot, one of them at most (one entry mints one
// token); for a session's revoke the acquire names the freed lock or
// semaphore, as a SessionEnd's hand-off does. LogFormatLockModes, JSON
// only: revokes are rare.
type Revoke struct {
	Lock       string      `json:"lock,omitempty"`
	Semaphore  string      `json:"semaphore,omitempty"`
	Token      uint64      `json:"token,omitempty"`
	Session    uint64      `json:"session,omitempty"`
	Next       *Acquire    `json:"next,omitempty"`
	NextPermit *SemAcquire `json:"next_permit,omitempty"`
}

func (*Revoke) Type() CommandType { return CmdRevoke }
