package entry

// A multi-lock is one grant over several lock names (fsm/multilock.go):
// one entry grants every name or none, with one token (the entry's index)
// and one secret for all, and one entry ends them all. Both are types of
// LogFormatLockModes, JSON only: they are rare next to a lock's cycle.

// MaxMultiNames bounds the names of one multi-acquire: the entry, the
// leader's holds and the answer stay small.
const MaxMultiNames = 64

// MultiAcquire grants every lock in Names, or none (each free, none in a
// lock-delay), in this one entry. The grant's token is the entry's; every
// name carries it, with the one secret Lease.
type MultiAcquire struct {
	Names  []string `json:"names"`
	Holder string   `json:"holder"`
	// Lease is the grant's secret, chosen by the leader.
	Lease     string `json:"lease"`
	TTLMillis int64  `json:"ttl_ms"`
	// Mode is ModeShared for a multi-grant in shared mode (every name
	// granted shared), "" for an exclusive one (LogFormatMultiModes).
	Mode string `json:"mode,omitempty"`
	// Session, when set, is the live session the grant lives under (with
	// its secret SessionLease), as a lock's under one: the session's TTL
	// and lock-delay are the grant's, TTLMillis is 0, and the session's
	// end ends every name (LogFormatMultiSessions).
	Session      uint64 `json:"session,omitempty"`
	SessionLease string `json:"session_lease,omitempty"`
	RequestID    string `json:"request_id,omitempty"`
	// NowMillis is the proposing leader's wall clock; informational.
	NowMillis int64 `json:"now_ms,omitempty"`
	// Principal is the authenticated caller, whose request id it is.
	Principal string `json:"principal,omitempty"`
}

// MultiRelease ends the multi-grant with Token, every name of it in this
// one entry: released when Lease is its secret, expired (Expired,
// proposed by the leader when the grant's lease ran out on its clock; no
// secret), or revoked by an operator (Revoked, LogFormatMultiSessions; no
// secret): an expiry and a revoke start each name's lock-delay. It hands no name over itself: one entry mints one token, and
// the leader serves the freed names' waiters in the entries right after,
// still holding their queues.
type MultiRelease struct {
	Token   uint64 `json:"token"`
	Lease   string `json:"lease,omitempty"`
	Expired bool   `json:"expired,omitempty"`
	Revoked bool   `json:"revoked,omitempty"`
}

func (*MultiAcquire) Type() CommandType { return CmdMultiAcquire }
func (*MultiRelease) Type() CommandType { return CmdMultiRelease }

// MultiLock is a live multi-grant as a snapshot holds it: its token and
// its names, in the order asked; each name's lock record holds the rest
// (holder, secret, TTL), the same in all.
type MultiLock struct {
	Token uint64   `json:"token"`
	Names []string `json:"names"`
}
