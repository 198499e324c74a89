package wire

import (
	"encoding/json"
	"net/http"
)

// Machine-readable error codes, in the "code" field of every error body.
// Clients depend on them exactly: add new ones, never rename. Codes lists
// them all.
const (
	// Malformed requests (400 unless noted).
	CodeInvalidName      = "invalid_name"
	CodeInvalidKey       = "invalid_key"
	CodeInvalidTTL       = "invalid_ttl"
	CodeInvalidWait      = "invalid_wait"
	CodeInvalidHolder    = "invalid_holder"
	CodeInvalidRequestID = "invalid_request_id"
	CodeInvalidLease     = "invalid_lease"
	CodeInvalidToken     = "invalid_token"
	CodeInvalidJSON      = "invalid_json"
	CodeInvalidMember    = "invalid_member"
	CodeInvalidSnapshot  = "invalid_snapshot"
	CodeInvalidEpoch     = "invalid_epoch" // a restore that would leave no token space
	CodeInvalidLockDelay = "invalid_lock_delay"
	CodeInvalidMode      = "invalid_mode"  // a lock mode other than shared or exclusive, or a shared acquire with a value
	CodeInvalidValue     = "invalid_value" // a lock value over 4 KiB or not UTF-8
	CodeInvalidIndex     = "invalid_index" // since, Last-Event-ID, wait_index
	CodeInvalidLimit     = "invalid_limit" // a semaphore limit outside 1 … 10,000, a history limit outside 1 … 1,024
	// CodeInvalidNames: a multi-acquire's names are none, more than
	// MaxMultiNames, one given twice, or one not a valid lock name.
	CodeInvalidNames     = "invalid_names"
	CodeBodyTooLarge     = "body_too_large"     // 413
	CodeMissingToken     = "missing_token"      // 428
	CodeMethodNotAllowed = "method_not_allowed" // 405
	// A JSON body sent without Content-Type: application/json (415).
	CodeUnsupportedMediaType = "unsupported_media_type"

	// Refusals of the lock service and the fenced store.
	CodeLockHeld      = "lock_held"       // 409
	CodeLeaseLost     = "lease_lost"      // 410
	CodeStaleToken    = "stale_token"     // 409
	CodeNotLockHolder = "not_lock_holder" // 409
	CodeNotFound      = "not_found"       // 404
	// CodeUnissuedToken: a fenced write's token is above every token
	// granted so far (409).
	CodeUnissuedToken = "unissued_token"
	// CodeLockDelay: the lock's last grant expired and its lock-delay is
	// running; Error.RetryAfterMillis is the time left (409).
	CodeLockDelay = "lock_delay"
	// CodeEventsCompacted: a watch asked for events older than the node
	// keeps; Error.Oldest and Error.Index say where to re-list from.
	CodeEventsCompacted = "events_compacted" // 410
	// CodeUnknownToken: no grant with that token is in the history.
	CodeUnknownToken = "unknown_token" // 404
	// CodeSemaphoreFull: every permit is held (409); Error.Held and
	// Error.Limit say how many.
	CodeSemaphoreFull = "semaphore_full"
	// CodeLimitMismatch: the acquire's limit differs from the one of the
	// semaphore's held permits, Error.Limit (409).
	CodeLimitMismatch = "limit_mismatch"
	// CodeMultiGrant: a release of one name of a multi-grant, whose names
	// end together: release the multi-grant (409).
	CodeMultiGrant = "multi_grant"

	// The cluster.
	CodeNoLeader       = "no_leader"       // 503
	CodeOutcomeUnknown = "outcome_unknown" // 503
	CodeMemberConflict = "member_conflict" // 409
	CodeUnknownMember  = "unknown_member"  // 404
	// CodeUpgradeRequired: the request needs a log format that some member's
	// build cannot read yet; upgrade every member first (409).
	CodeUpgradeRequired = "upgrade_required"

	// Limits and access control.
	CodeTooManyWaiters = "too_many_waiters" // 429
	CodeTooManyLocks   = "too_many_locks"   // 429
	CodeKVFull         = "kv_full"          // 429: the fenced store, or the caller's share, is full
	CodeRateLimited    = "rate_limited"     // 429, with Retry-After
	// CodeTooManyWatches: the caller, or the node, holds as many event
	// streams (or parked blocking reads) as the node allows (429, with
	// Retry-After).
	CodeTooManyWatches = "too_many_watches"
	CodeUnauthorized   = "unauthorized" // 401, with WWW-Authenticate
	CodeForbidden      = "forbidden"    // 403
	// CodeKeyedMember: the cluster secret names a member that has its own
	// member key, which alone speaks for it (401): a member's data dir
	// that lost its key (wiped, replaced) is no longer that member.
	CodeKeyedMember = "keyed_member"
	// A node without access control answers only requests that name it by
	// an IP address, localhost, a name of its members or an allowed host
	// (421), and refuses state changes a browser sends from another origin
	// (403 cross_origin).
	CodeHostNotAllowed = "host_not_allowed"
	CodeCrossOrigin    = "cross_origin"

	// A fenced resource (package fence): a Fencing-Sequence that is not a
	// strict decimal, and a write that names no key (400).
	CodeMalformedSequence = "malformed_sequence"
	CodeEmptyKey          = "empty_key"

	CodeTimeout  = "timeout"  // 504
	CodeInternal = "internal" // 500, or 503 when the token space is exhausted
)

// Codes returns every error code, so that a client can check it knows them
// all.
func Codes() []string {
	return []string{
		CodeInvalidName, CodeInvalidKey, CodeInvalidTTL, CodeInvalidWait, CodeInvalidHolder,
		CodeInvalidRequestID, CodeInvalidLease, CodeInvalidToken, CodeInvalidJSON, CodeInvalidMember,
		CodeInvalidSnapshot, CodeInvalidIndex, CodeBodyTooLarge, CodeMissingToken, CodeMethodNotAllowed, CodeUnsupportedMediaType,
		CodeLockHeld, CodeLeaseLost, CodeStaleToken, CodeNotLockHolder, CodeNotFound,
		CodeEventsCompacted, CodeUnknownToken,
		CodeNoLeader, CodeOutcomeUnknown, CodeMemberConflict, CodeUnknownMember,
		CodeTooManyWaiters, CodeTooManyLocks, CodeRateLimited, CodeUnauthorized, CodeForbidden, CodeKeyedMember,
		CodeHostNotAllowed, CodeCrossOrigin,
		CodeInvalidEpoch, CodeUnissuedToken, CodeUpgradeRequired, CodeKVFull,
		CodeMalformedSequence, CodeEmptyKey,
		CodeTimeout, CodeInternal,
		CodeInvalidLockDelay, CodeLockDelay,
		CodeInvalidLimit, CodeSemaphoreFull, CodeLimitMismatch, CodeInvalidValue,
		CodeTooManyWatches,
		CodeUnknownSession, CodeSessionExpired, CodeSessionMismatch, CodeSessionGrant,
		CodeInvalidNames, CodeMultiGrant,
		CodeRevoked,
		CodeInvalidMode,
	}
}

// Error is the body of every error response.
type Error struct {
	Message string `json:"error"`
	Code    string `json:"code"`
	// Holder and Token describe the current grant on lock_held, and Lock
	// names the lock (a multi-acquire's first held name).
	Lock   string `json:"lock,omitempty"`
	Holder string `json:"holder,omitempty"`
	Token  uint64 `json:"token,omitempty"`
	// LastToken is the key's high-water mark on stale_token.
	LastToken uint64 `json:"last_token,omitempty"`
	// LastSeq is the sequence of the last accepted write on stale_token
	// from a fenced resource, when writes carry a Fencing-Sequence.
	LastSeq uint64 `json:"last_seq,omitempty"`
	// RetryAfterMillis is the time left of the lock-delay on lock_delay.
	RetryAfterMillis int64 `json:"retry_after_ms,omitempty"`
	// Oldest is the lowest since a node still serves, and Index its applied
	// index, on events_compacted: re-list (the list's Fencer-Index is at
	// least Index) and watch from the list's index.
	Oldest uint64 `json:"oldest,omitempty"`
	Index  uint64 `json:"index,omitempty"`
	// Held and Limit are a semaphore's permits held and its limit, on
	// semaphore_full and limit_mismatch.
	Held  int `json:"held,omitempty"`
	Limit int `json:"limit,omitempty"`
	// Reason says why on unknown_token: ReasonNotKept, ReasonNeverGranted
	// or ReasonNoHistory.
	Reason string `json:"reason,omitempty"`
}

func (e *Error) Error() string { return e.Code + ": " + e.Message }

// WriteError writes e as the JSON body of an error response with status.
// It is the one writer of error bodies: the API, its middleware and fenced
// resources all answer through it. Headers a status calls for (Retry-After,
// WWW-Authenticate) are the caller's to set first.
func WriteError(w http.ResponseWriter, status int, e *Error) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(e)
}
