package entry

import "encoding/json"

// A session is one lease for many grants (fsm/session.go): its creation is
// an entry, its renewals are not (the leader times it, as it times a
// grant's lease), and its end, by expiry or by close, is one entry that
// ends every grant under it and hands each freed name to its next waiter.

// Session is a live session: its id is the token of the entry that created
// it (from the one sequence of tokens), Lease its secret.
type Session struct {
	ID              uint64 `json:"id"`
	Holder          string `json:"holder"`
	Lease           string `json:"lease"`
	TTLMillis       int64  `json:"ttl_ms"`
	LockDelayMillis int64  `json:"lock_delay_ms,omitempty"`
	RequestID       string `json:"request_id,omitempty"`
	Principal       string `json:"principal,omitempty"`
	// CreatedAtMillis is the creating leader's wall clock; informational.
	CreatedAtMillis int64 `json:"created_at_ms,omitempty"`
}

// SessionCreate opens a session. Its id is the entry's token.
type SessionCreate struct {
	Holder string `json:"holder"`
	// Lease is the session's secret, chosen by the leader.
	Lease     string `json:"lease"`
	TTLMillis int64  `json:"ttl_ms"`
	// LockDelayMillis is the lock-delay of every grant under the session
	// that asks for none of its own.
	LockDelayMillis int64  `json:"lock_delay_ms,omitempty"`
	RequestID       string `json:"request_id,omitempty"`
	NowMillis       int64  `json:"now_ms,omitempty"`
	Principal       string `json:"principal,omitempty"`
}

// SessionEnd ends a live session and every grant under it, in this one
// entry: closed when Lease is the session's secret, or expired (Expired,
// proposed by the leader when the session's TTL ran out on its clock; no
// secret). A freed lock goes to the acquire in Next that names it, a freed
// permit slot to the one in NextPermits that names its semaphore, in the
// same entry, as a release's Next does; an expiry starts each grant's
// lock-delay, as an Expire does. The two lists hold one acquire at most
// between them: one entry mints one token (fsm/session.go).
type SessionEnd struct {
	Session     uint64        `json:"session"`
	Lease       string        `json:"lease,omitempty"`
	Expired     bool          `json:"expired,omitempty"`
	Next        []*Acquire    `json:"next,omitempty"`
	NextPermits []*SemAcquire `json:"next_permits,omitempty"`
}

// sessionEndFields is SessionEnd without its methods, for its JSON.
type sessionEndFields SessionEnd

// sessionEndJSON is a SessionEnd's JSON: its hand-off carries its
// principal whatever its fields. An acquire's own JSON leaves the principal
// out unless it has a lock-delay or a value (older builds would drop it),
// but every reader of a session's end reads it, and a hand-off without its
// principal would be remembered as nobody's request, which another
// principal could then replay (the review caught it).
type sessionEndJSON struct {
	*sessionEndFields
	Next []acquireWithPrincipal `json:"next,omitempty"`
}

// MarshalJSON writes the hand-off with its principal.
func (c *SessionEnd) MarshalJSON() ([]byte, error) {
	out := sessionEndJSON{sessionEndFields: (*sessionEndFields)(c)}
	for _, n := range c.Next {
		out.Next = append(out.Next, acquireWithPrincipal{(*acquireFields)(n), n.Principal})
	}
	return json.Marshal(out)
}

// UnmarshalJSON reads the hand-off with its principal.
func (c *SessionEnd) UnmarshalJSON(b []byte) error {
	var in struct {
		*sessionEndFields
		Next []json.RawMessage `json:"next,omitempty"`
	}
	in.sessionEndFields = (*sessionEndFields)(c)
	if err := json.Unmarshal(b, &in); err != nil {
		return err
	}
	c.Next = nil
	for _, raw := range in.Next {
		a := &Acquire{}
		w := acquireWithPrincipal{acquireFields: (*acquireFields)(a)}
		if err := json.Unmarshal(raw, &w); err != nil {
			return err
		}
		a.Principal = w.Principal
		c.Next = append(c.Next, a)
	}
	return nil
}

func (*SessionCreate) Type() CommandType { return CmdSessionCreate }
func (*SessionEnd) Type() CommandType    { return CmdSessionEnd }

// sessionFields reports whether cmd carries an acquire under a session
// (itself or a hand-off), which only members of LogFormatSession read.
func sessionFields(cmd Command) bool {
	var next *Acquire
	var permit *SemAcquire
	switch c := cmd.(type) {
	case *Acquire:
		next = c
	case *Release:
		next = c.Next
	case *Expire:
		next = c.Next
	case *EndDelay:
		next, permit = c.Next, c.NextPermit
	case *SemAcquire:
		permit = c
	case *SemRelease:
		permit = c.Next
	case *SemExpire:
		permit = c.Next
	}
	return (next != nil && next.Session != 0) || (permit != nil && permit.Session != 0)
}
