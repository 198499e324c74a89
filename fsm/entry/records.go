package entry

// The records the replicated state is made of, as fsm's reads return them
// and its snapshots hold them, and the token they are ordered by.

// EpochShift is where the epoch starts in a token: token = epoch<<EpochShift |
// log index. In normal running the epoch is 0 and the token is the log index.
// A restore or forced recovery bumps the epoch, so every later token is above
// every token of the old cluster whatever its log index was. An epoch holds
// 2^40 (about 10^12) log entries.
const EpochShift = 40

// MaxEpoch bounds the epoch so that a token fits in 64 bits.
const MaxEpoch = 1 << (64 - EpochShift)

// MaxIndex is the largest log index that can carry a token in one epoch.
const MaxIndex = 1<<EpochShift - 1

// MakeToken returns the fencing token of a grant at a log index.
func MakeToken(epoch, index uint64) uint64 { return epoch<<EpochShift | index }

// TokenEpoch returns the epoch a token was granted in.
func TokenEpoch(token uint64) uint64 { return token >> EpochShift }

// LastEpoch is the last epoch that can issue tokens: its tokens,
// LastEpoch<<EpochShift | index, are the largest that fit in 64 bits. A
// restore or a forced recovery may move the epoch up to it (16,777,215) and
// never past it, since an epoch past it grants nothing, ever. No epoch below
// it is held back: only restores and recoveries move the epoch, so a held
// back one could only be entered the way LastEpoch is, and would just move
// the wall one step lower. What matters is that the step past it is refused
// with its reason (ErrNoEpochLeft) rather than taken.
const LastEpoch = MaxEpoch - 1

// Lock is a grant: the current holder of a held lock, its token, its secret
// and the length of its lease. A free lock has no grant.
type Lock struct {
	Name   string `json:"name"`
	Holder string `json:"holder"`
	Token  uint64 `json:"token"`
	// Lease is the grant's secret ("lease" in JSON, as in the API).
	Lease string `json:"lease"`
	// TTLMillis is the lease: how long the grant stays valid unrenewed.
	TTLMillis int64  `json:"ttl_ms"`
	RequestID string `json:"request_id,omitempty"`
	// GrantedAtMillis is the granting leader's wall clock; informational only.
	GrantedAtMillis int64 `json:"granted_at_ms,omitempty"`
	// Principal is the caller whose request id the grant answers ("" without
	// an ACL, and for grants of entries older than LogFormatPrincipal).
	Principal string `json:"principal,omitempty"`
	// LockDelayMillis is the lock-delay this grant starts if it expires.
	LockDelayMillis int64 `json:"lock_delay_ms,omitempty"`
	// Value is what the holder publishes, an election's leader its address
	// say (at most MaxLockValue bytes); SetValue changes it.
	Value string `json:"value,omitempty"`
	// Session is the session the grant lives under (0: none, the grant
	// has a lease of its own); TTLMillis is then the session's.
	Session uint64 `json:"session,omitempty"`
	// Mode is ModeShared for one of a lock's shared grants, "" for its
	// exclusive grant (a snapshot keeps shared grants in records of their
	// own, version 6).
	Mode string `json:"mode,omitempty"`
	// WaitIndex is the index of the Enqueue of the durable waiter this
	// grant was given to (0: none). Reads fill it in; the lock table and
	// the lock records do not carry it (the state's waited do).
	WaitIndex uint64 `json:"wait_index,omitempty"`
}

// FencedKey is a value in the cluster's fenced key-value store together with
// the token of the write that stored it, its high-water mark.
type FencedKey struct {
	Key   string `json:"key"`
	Value []byte `json:"value"`
	Token uint64 `json:"token"`
	// Principal is the last writer, whose share of the store the value
	// counts in ("" without an ACL).
	Principal string `json:"principal,omitempty"`
}

// RequestRecord remembers the token an acquire request id produced.
type RequestRecord struct {
	Key   string `json:"key"`
	Token uint64 `json:"token"`
}

// Delay is a running lock-delay: a lock's, or, when Semaphore is set
// instead of Lock, one permit slot's of a semaphore, which Limit then
// records (a semaphore whose only slots in use are delayed keeps its limit).
type Delay struct {
	Lock string `json:"lock"`
	// Since is the index of the expiry that started it; for a second slot
	// of one semaphore that one session's expiry delays, its permit's token
	// (or the nearest number below it that no running delay of the
	// semaphore is known by).
	Since     uint64 `json:"since"`
	Millis    int64  `json:"ms"`
	Semaphore string `json:"semaphore,omitempty"`
	Limit     int    `json:"limit,omitempty"`
}

// Permit is one held permit of a semaphore.
type Permit struct {
	Semaphore string `json:"semaphore"`
	Holder    string `json:"holder"`
	Token     uint64 `json:"token"`
	Lease     string `json:"lease"` // the permit's secret
	TTLMillis int64  `json:"ttl_ms"`
	// Limit is the semaphore's limit when the permit was granted, which is
	// its limit for as long as the permit is held.
	Limit           int    `json:"limit"`
	RequestID       string `json:"request_id,omitempty"`
	GrantedAtMillis int64  `json:"granted_at_ms,omitempty"`
	Principal       string `json:"principal,omitempty"`
	// LockDelayMillis is the delay this permit's slot starts if it expires.
	LockDelayMillis int64 `json:"lock_delay_ms,omitempty"`
	// Session is the session the permit lives under (0: none).
	Session uint64 `json:"session,omitempty"`
	// WaitIndex is as a Lock's: filled in by reads, never stored.
	WaitIndex uint64 `json:"wait_index,omitempty"`
}
