package wire

import "time"

// GrantRevoked is GrantRecord.Ended of a grant an operator revoked.
const GrantRevoked = "revoked"

// GrantHeld is GrantRecord.Ended while the grant is still held.
const GrantHeld = "held"

// Why a token lookup answered 404 unknown_token (Error.Reason).
const (
	// ReasonNotKept: the token may have been a grant, older than the
	// grant history the cluster keeps (or from before it kept one, or a
	// semaphore permit's from before it recorded permits).
	ReasonNotKept = "not_kept"
	// ReasonNeverGranted: no lock or permit was granted with this token
	// (above the last token issued, or within the history and neither a
	// lock's grant nor a semaphore permit's).
	ReasonNeverGranted = "never_granted"
	// ReasonNoHistory: the cluster keeps no grant history (--grant-history
	// 0, or not every member runs a build that keeps one yet).
	ReasonNoHistory = "no_history"
)

// GrantRecord is one grant of the cluster's grant history: the answer to
// GET /v1/tokens/{token}, and each entry of a lock's or a semaphore's
// history. A semaphore permit's names its semaphore, and its lock is "".
type GrantRecord struct {
	Token        uint64 `json:"token"`
	Lock         string `json:"lock"`
	Semaphore    string `json:"semaphore,omitempty"`
	Holder       string `json:"holder"`
	GrantedIndex uint64 `json:"granted_index"`
	// Ended is how the grant ended: released, expired, handed_off (to a
	// waiter, in the same entry), voided (a restore or recovery dropped
	// it), revoked (an operator ended it, even when the entry handed it
	// to a waiter; GrantRevoked), or held (not ended yet).
	Ended string `json:"ended"`
	// EndedIndex is the log index of the entry that ended it (absent
	// while held).
	EndedIndex uint64 `json:"ended_index,omitempty"`
	// Mode is ModeShared for a lock's shared grant; absent for an
	// exclusive one and for a permit.
	Mode string `json:"mode,omitempty"`
	// Names are a multi-grant's locks, in the order asked (absent for any
	// other grant): one record, shown in every name's history, its Lock
	// the name asked about (the first, in a token lookup).
	Names []string `json:"names,omitempty"`
}

// GrantHistorySettings are the grant history a cluster keeps: its last
// Global grants, and each lock's last PerLock (GET /v1/cluster).
type GrantHistorySettings struct {
	PerLock int `json:"per_lock"`
	Global  int `json:"global"`
}

// LockHistory is the answer to GET /v1/locks/{name}/history: the lock's
// last grants, newest first.
type LockHistory struct {
	Lock   string        `json:"lock"`
	Grants []GrantRecord `json:"grants"`
}

// SemaphoreHistory is the answer to GET /v1/semaphores/{name}/history: the
// semaphore's last permits, newest first.
type SemaphoreHistory struct {
	Semaphore string        `json:"semaphore"`
	Grants    []GrantRecord `json:"grants"`
}

// MaxBlockingWait bounds the wait of a blocking read (GET
// /v1/locks/{name}?wait_index=N&wait=D); it is also the wait when wait is
// left out.
const MaxBlockingWait = 5 * time.Minute

// MaxHistoryLimit is the largest ?limit= of a lock's or a semaphore's
// history.
const MaxHistoryLimit = 1024
