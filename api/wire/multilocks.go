package wire

// Multi-locks: one grant over several lock names, granted all or none in
// one entry, with one token and one secret (POST /v1/locks/acquire,
// /renew, /release).

// MaxMultiNames bounds the names of one multi-acquire.
const MaxMultiNames = 64

// MultiAcquireRequest is the body of POST /v1/locks/acquire. Names are at
// most MaxMultiNames valid lock names, none twice (CodeInvalidNames).
// Holder, TTLMillis and RequestID are as an acquire's. WaitMs 0 answers at
// once, all or nothing (lock_held naming the first held name); more queues
// the request in every name's FIFO for up to that long (as an acquire's,
// at most MaxWait), and it is granted every name in one entry once it
// heads each FIFO and all are free. Mode is as an acquire's (ModeShared,
// ModeExclusive or absent: exclusive; another is CodeInvalidMode): in
// shared mode every name is granted as a shared grant, all with the one
// token, beside the names' other shared grants and never past an
// exclusive request queued before it; it needs every member to read log
// format 11 (CodeUpgradeRequired). Session and SessionLease are refused
// (CodeInvalidToken): a multi-lock under a session is not built, as the
// log entry of a multi-acquire carries no session.
type MultiAcquireRequest struct {
	Names        []string `json:"names"`
	Holder       string   `json:"holder"`
	TTLMillis    int64    `json:"ttl_ms"`
	WaitMs       int64    `json:"wait_ms"`
	RequestID    string   `json:"request_id,omitempty"`
	Mode         string   `json:"mode,omitempty"`
	Session      uint64   `json:"session,omitempty"`
	SessionLease string   `json:"session_lease,omitempty"`
	// Durable is refused (CodeInvalidWait): a waiting multi-acquire keeps
	// its place in each name's FIFO on the leader only.
	Durable bool `json:"durable,omitempty"`
}

// MultiGrant is the answer to a successful multi-acquire: every name is
// held with Token and the one secret Lease.
type MultiGrant struct {
	Names     []string `json:"names"`
	Holder    string   `json:"holder"`
	Token     uint64   `json:"token"`
	Lease     string   `json:"lease"`
	TTLMillis int64    `json:"ttl_ms"`
	// Mode is ModeShared for a multi-grant in shared mode, absent for an
	// exclusive one.
	Mode      string `json:"mode,omitempty"`
	RequestID string `json:"request_id,omitempty"`
	// Existing: the request id had been granted before; this is that
	// grant again.
	Existing bool `json:"existing,omitempty"`
}

// MultiRenewResponse is the answer to a multi-grant's renewal (POST
// /v1/locks/renew with a LeaseRequest).
type MultiRenewResponse struct {
	Names     []string `json:"names"`
	Token     uint64   `json:"token"`
	TTLMillis int64    `json:"ttl_ms"`
}

// MultiReleaseResponse is the answer to a multi-grant's release (POST
// /v1/locks/release with a LeaseRequest).
type MultiReleaseResponse struct {
	Names    []string `json:"names"`
	Token    uint64   `json:"token"`
	Released bool     `json:"released"`
}
