package wire

// Revoke: an operator ends a grant, or a session and every grant under it,
// now, as an expiry would (its lock-delay applies; the next waiter is
// served in the same entry). Operators only, audited. The revoked holder's
// next renew (and release) is 410 revoked, and its late fenced writes are
// refused: the next grant's token is greater.
//
//	POST /v1/locks/{name}/revoke       {"token": N}
//	POST /v1/semaphores/{name}/revoke  {"token": N}
//	POST /v1/sessions/{id}/revoke

// RevokeRequest is the body of a lock's or a semaphore's revoke: the
// token of the grant to end.
type RevokeRequest struct {
	Token uint64 `json:"token"`
}

// RevokeResponse is the answer to a revoke of a lock's grant or a permit:
// the grant it ended, and the grant a waiter got in the same entry.
type RevokeResponse struct {
	Lock      string `json:"lock,omitempty"`
	Semaphore string `json:"semaphore,omitempty"`
	Holder    string `json:"holder"`
	Token     uint64 `json:"token"`
	// NextHolder and NextToken are the waiter's grant, when the name went
	// to one in the revoking entry.
	NextHolder string `json:"next_holder,omitempty"`
	NextToken  uint64 `json:"next_token,omitempty"`
	// LockDelayMillis is the lock-delay the revoke started (0: none).
	LockDelayMillis int64 `json:"lock_delay_ms,omitempty"`
}

// SessionRevokeResponse is the answer to a session's revoke: every grant
// it held, all ended in the revoking entry.
type SessionRevokeResponse struct {
	Session uint64         `json:"session"`
	Holder  string         `json:"holder"`
	Revoked []SessionGrant `json:"revoked"`
}

// EventRevoked: an operator revoked a grant (Lock, or Semaphore with Limit
// and Held, and Holder and Token), or a session (Session and Holder
// alone), every grant under it ending with an event of its own in the same
// entry. A grant whose name went to a waiter in that entry is handed_off
// (permit_handed_off) with Reason revoked instead.
const EventRevoked = "revoked"

// CodeRevoked (410): an operator revoked the grant or the session; its
// holder must stop using it (every write it fences is refused from now)
// and acquire again.
const CodeRevoked = "revoked"
