package wire

// Sessions: one lease for many grants. A client process creates a session,
// keeps it alive with one renewal per TTL/3 whatever it holds, and acquires
// locks, semaphore permits and elections under it ("session" and
// "session_lease" in the acquire body instead of "ttl_ms"). Each such grant
// has a token and a lease (secret) of its own, for release and fencing, and
// lives as long as the session: when the session expires or is closed,
// every grant under it ends in that one log entry.

// SessionRequest is the body of POST /v1/sessions. TTLMillis is bounded as
// a lock's; LockDelayMillis, when set, is the lock-delay of every grant
// under the session that does not ask for one of its own, started when the
// session expires (not when it is closed).
type SessionRequest struct {
	Holder          string `json:"holder"`
	TTLMillis       int64  `json:"ttl_ms"`
	LockDelayMillis int64  `json:"lock_delay_ms,omitempty"`
	RequestID       string `json:"request_id,omitempty"`
}

// Session is the answer to a successful POST /v1/sessions.
type Session struct {
	// Session is the session's id: the index of the entry that created it,
	// a number from the same sequence as tokens.
	Session uint64 `json:"session"`
	Holder  string `json:"holder"`
	// Lease is the session's secret (LeaseSecretLen characters), which
	// renew, close and every acquire under the session must present.
	Lease           string `json:"lease"`
	TTLMillis       int64  `json:"ttl_ms"`
	LockDelayMillis int64  `json:"lock_delay_ms,omitempty"`
	RequestID       string `json:"request_id,omitempty"`
	// Existing is true when this is a retry answered with the earlier
	// session.
	Existing bool `json:"existing,omitempty"`
}

// SessionLeaseRequest is the body of POST /v1/sessions/{id}/renew and
// /close: the session's secret.
type SessionLeaseRequest struct {
	Lease string `json:"lease"`
}

// SessionRenewResponse is the answer to a successful session renewal.
type SessionRenewResponse struct {
	Session   uint64 `json:"session"`
	TTLMillis int64  `json:"ttl_ms"`
}

// Kinds of grant under a session (SessionGrant.Kind). An election is a
// lock.
const (
	GrantKindLock      = "lock"
	GrantKindSemaphore = "semaphore"
)

// SessionGrant is one grant under a session: a lock (or election) or a
// semaphore permit, by its name and token.
type SessionGrant struct {
	Kind  string `json:"kind"`
	Name  string `json:"name"`
	Token uint64 `json:"token"`
}

// SessionCloseResponse is the answer to a successful close: every grant
// the session held, all ended in the closing entry.
type SessionCloseResponse struct {
	Session  uint64         `json:"session"`
	Released []SessionGrant `json:"released"`
}

// SessionStatus is the answer to GET /v1/sessions/{id}, and one element of
// SessionList; it never includes the secret.
type SessionStatus struct {
	Session         uint64 `json:"session"`
	Holder          string `json:"holder"`
	TTLMillis       int64  `json:"ttl_ms"`
	LockDelayMillis int64  `json:"lock_delay_ms,omitempty"`
	// RemainingMillis is the leader's view of the session's time left;
	// absent on a stale read from a follower.
	RemainingMillis *int64 `json:"remaining_ms,omitempty"`
	// Grants are the grants held under the session, sorted by token.
	Grants []SessionGrant `json:"grants"`
}

// SessionList is the answer to GET /v1/sessions: the sessions whose holder
// the caller may read (ACL-scoped as locks are, by the holder's name
// against the read-lock prefixes), sorted by id.
type SessionList struct {
	Sessions []SessionStatus `json:"sessions"`
}

// Events of sessions: created, expired (every grant under it ended in the
// same entry, each with its own expired or handed_off event), closed (the
// same, released). They carry Session and Holder.
const (
	EventSessionCreated = "session_created"
	EventSessionExpired = "session_expired"
	EventSessionClosed  = "session_closed"
)

// Refusals of sessions.
const (
	// CodeUnknownSession (404): no live session has that id, and none that
	// ended is remembered with it.
	CodeUnknownSession = "unknown_session"
	// CodeSessionExpired (410): the session ended (expired or closed);
	// every grant under it ended with it.
	CodeSessionExpired = "session_expired"
	// CodeSessionMismatch (409): the session_lease presented is not the
	// session's.
	CodeSessionMismatch = "session_mismatch"
	// CodeSessionGrant (409): a renewal of a grant held under a session:
	// renew the session instead.
	CodeSessionGrant = "session_grant"
)
