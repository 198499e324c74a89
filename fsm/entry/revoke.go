package entry

import "encoding/json"

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

// revokeFields is Revoke without its methods, for its JSON.
type revokeFields Revoke

// revokeJSON is a Revoke's JSON: the hand-off's principal beside it, which
// an Acquire's own JSON leaves out unless it has a lock-delay or a value
// (acquireWithPrincipal, for older builds); every build that reads a
// revoke reads it. Without it the waiter's grant lost its principal (and
// its request id was no longer its principal's).
type revokeJSON struct {
	*revokeFields
	NextPrincipal string `json:"next_principal,omitempty"`
}

// MarshalJSON writes the hand-off's principal.
func (c *Revoke) MarshalJSON() ([]byte, error) {
	w := revokeJSON{revokeFields: (*revokeFields)(c)}
	if c.Next != nil {
		w.NextPrincipal = c.Next.Principal
	}
	return json.Marshal(w)
}

// UnmarshalJSON reads the hand-off's principal back into it.
func (c *Revoke) UnmarshalJSON(b []byte) error {
	w := revokeJSON{revokeFields: (*revokeFields)(c)}
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	if c.Next != nil && w.NextPrincipal != "" {
		c.Next.Principal = w.NextPrincipal
	}
	return nil
}
