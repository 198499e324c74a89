package client

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/fencer-io/fencer/api/wire"
)

// Errors a caller can test with errors.Is. The first group matches the API's
// error codes: an *APIError with that code matches its sentinel, and carries
// the details (holder, tokens) for errors.As. The rest are the client's own.
var (
	// ErrLockHeld: another grant holds the lock (409 lock_held);
	// APIError.Holder and APIError.Token name it.
	ErrLockHeld = errors.New("lock held")
	// ErrLeaseLost: the grant is not the lock's current one any more: its
	// lease expired, it was released, or the secret is wrong (410
	// lease_lost).
	ErrLeaseLost = errors.New("lease lost")
	// ErrStaleToken: a fenced write's token was not greater than the key's
	// last token (409 stale_token); APIError.LastToken is that token.
	ErrStaleToken = errors.New("stale fencing token")
	// ErrNotLockHolder: a fenced write named a lock whose current grant is
	// not the write's token (409 not_lock_holder).
	ErrNotLockHolder = errors.New("not the lock holder")
	// ErrUnissuedToken: a fenced write's token is above every token the
	// cluster has granted, so nobody holds it (409 unissued_token).
	ErrUnissuedToken = errors.New("fencing token was never issued")
	// ErrKVFull: the fenced store holds as many keys or value bytes as it
	// may, in all or for this caller (429 kv_full).
	ErrKVFull = errors.New("fenced store full")
	// ErrLockDelay: the lock's last grant expired and its lock-delay is
	// still running (409 lock_delay); APIError.RetryAfter is the time left.
	ErrLockDelay = errors.New("lock in its lock-delay")
	// ErrSemaphoreFull: every permit of the semaphore is held (409
	// semaphore_full); APIError.Held and Limit say how many.
	ErrSemaphoreFull = errors.New("semaphore full")
	// ErrLimitMismatch: the acquire's limit differs from the one of the
	// semaphore's held permits, APIError.Limit (409 limit_mismatch).
	ErrLimitMismatch = errors.New("semaphore limit mismatch")
	// ErrUnknownSession: no session has that id (404 unknown_session).
	ErrUnknownSession = errors.New("unknown session")
	// ErrSessionExpired: the session ended, expired or closed, and every
	// grant under it with it (410 session_expired).
	ErrSessionExpired = errors.New("session expired")
	// ErrSessionMismatch: the session lease presented is not the
	// session's (409 session_mismatch).
	ErrSessionMismatch = errors.New("session lease mismatch")
	// ErrSessionGrant: a grant held under a session is renewed by renewing
	// its session (409 session_grant).
	ErrSessionGrant = errors.New("grant held under a session")
	// ErrMultiGrant: a release of one name of a multi-lock, whose names
	// end together: release the MultiLock (409 multi_grant).
	ErrMultiGrant = errors.New("lock is one name of a multi-lock")
	// ErrRevoked: an operator revoked the grant or the session (410
	// revoked). An answer with that code matches ErrLeaseLost too: the
	// grant is lost, for good.
	ErrRevoked = errors.New("revoked")
	// ErrUpgradeRequired: the request needs every member to run a newer
	// build first (409 upgrade_required).
	ErrUpgradeRequired = errors.New("upgrade required")
	// ErrMissingToken: a fenced write carried no token (428); a malformed
	// one is ErrInvalid (400 invalid_token).
	ErrMissingToken = errors.New("missing fencing token")
	// ErrNoLeader: the cluster has no reachable leader (503 no_leader).
	ErrNoLeader = errors.New("no leader")
	// ErrOutcomeUnknown: a write may or may not have taken effect, because
	// leadership was lost (503 outcome_unknown) or because an attempt was
	// sent but its answer never arrived and the retry could not tell.
	ErrOutcomeUnknown = errors.New("outcome unknown")
	// ErrNotFound: no such key, or no such route (404).
	ErrNotFound = errors.New("not found")
	// ErrInvalid: the request was malformed (any 400, 405, 413 and 415).
	ErrInvalid = errors.New("invalid request")
	// ErrTooManyWaiters: the lock's wait queue is full (429).
	ErrTooManyWaiters = errors.New("too many waiters")
	// ErrTooManyLocks: the holder, or the cluster, holds as many locks as
	// it may (429 too_many_locks).
	ErrTooManyLocks = errors.New("too many locks")
	// ErrRateLimited: this client sent more requests than the server's rate
	// limit allows (429 rate_limited, with Retry-After), or holds as many
	// event streams or blocking reads as a member allows (429
	// too_many_watches).
	ErrRateLimited = errors.New("rate limited")
	// ErrUnauthorized: the request carried no valid bearer token (401).
	ErrUnauthorized = errors.New("unauthorized")
	// ErrForbidden: the token may not do this, or not on this name (403),
	// or a browser sent a state change from another origin (403
	// cross_origin).
	ErrForbidden = errors.New("forbidden")
	// ErrHostNotAllowed: a node without access control does not answer to
	// the host name in the endpoint (421 host_not_allowed): use its IP
	// address, or list the name in the node's --allowed-hosts.
	ErrHostNotAllowed = errors.New("host not allowed")
	// ErrMemberConflict: a join or an add conflicts with an existing member
	// (409 member_conflict).
	ErrMemberConflict = errors.New("member conflict")
	// ErrUnknownMember: no member has that id (404 unknown_member).
	ErrUnknownMember = errors.New("unknown member")
	// ErrEventsCompacted: a watch asked for events older than the node
	// keeps (410 events_compacted): re-list, then watch from the list's
	// index. APIError.Oldest and APIError.Index say what the node has.
	ErrEventsCompacted = errors.New("events compacted")
	// ErrUnknownToken: no grant with that token is in the cluster's history
	// (404 unknown_token): never issued, or older than what is kept.
	ErrUnknownToken = errors.New("unknown token")
	// ErrTimeout: the server gave up on the request's work (504 timeout).
	ErrTimeout = errors.New("server timeout")
	// ErrInternal: the server failed (500 internal, or 503 when the token
	// space is exhausted).
	ErrInternal = errors.New("internal server error")

	// ErrUnavailable: no endpoint answered (connection errors on every
	// attempt).
	ErrUnavailable = errors.New("cluster unavailable")
	// ErrLeaseExpired: the lease's local deadline passed before a renewal
	// was confirmed, so the client can no longer be sure it holds the lock.
	// The server may still hold it for up to the safety margin.
	ErrLeaseExpired = errors.New("lease expired: no renewal confirmed before the local deadline")
	// ErrReleased: the lease was released by its holder.
	ErrReleased = errors.New("lease released")
	// ErrNotFencer: an endpoint answered, but not as a fencer node does (a
	// 404 without fencer's JSON error body): the address is wrong.
	ErrNotFencer = errors.New("not a fencer node")
	// ErrBadAnswer: an answer a fencer node would not give, which the
	// client does not believe: a status that is neither 2xx nor an error (a
	// redirect, which the client never follows), a body that is not the
	// JSON the contract says (empty, HTML, truncated, a token that is not a
	// positive integer), one that does not match the request (another
	// name, holder or token, a longer TTL than asked, a malformed lease
	// secret), or one longer than WithMaxAnswerBytes. It is not retried.
	// After PutFenced it leaves unknown whether the value was written.
	ErrBadAnswer = errors.New("answer not believed")
)

// codeErrors maps every API error code (wire.Codes) to its sentinel.
var codeErrors = map[string]error{
	wire.CodeInvalidName:          ErrInvalid,
	wire.CodeInvalidKey:           ErrInvalid,
	wire.CodeInvalidTTL:           ErrInvalid,
	wire.CodeInvalidWait:          ErrInvalid,
	wire.CodeInvalidHolder:        ErrInvalid,
	wire.CodeInvalidRequestID:     ErrInvalid,
	wire.CodeInvalidLease:         ErrInvalid,
	wire.CodeInvalidToken:         ErrInvalid,
	wire.CodeInvalidJSON:          ErrInvalid,
	wire.CodeInvalidMember:        ErrInvalid,
	wire.CodeInvalidSnapshot:      ErrInvalid,
	wire.CodeInvalidIndex:         ErrInvalid,
	wire.CodeInvalidEpoch:         ErrInvalid,
	wire.CodeBodyTooLarge:         ErrInvalid,
	wire.CodeMalformedSequence:    ErrInvalid,
	wire.CodeEmptyKey:             ErrInvalid,
	wire.CodeMethodNotAllowed:     ErrInvalid,
	wire.CodeUnsupportedMediaType: ErrInvalid,
	wire.CodeHostNotAllowed:       ErrHostNotAllowed,
	wire.CodeCrossOrigin:          ErrForbidden,
	wire.CodeMissingToken:         ErrMissingToken,
	wire.CodeLockHeld:             ErrLockHeld,
	wire.CodeLeaseLost:            ErrLeaseLost,
	wire.CodeStaleToken:           ErrStaleToken,
	wire.CodeNotLockHolder:        ErrNotLockHolder,
	wire.CodeUnissuedToken:        ErrUnissuedToken,
	wire.CodeKVFull:               ErrKVFull,
	wire.CodeUpgradeRequired:      ErrUpgradeRequired,
	wire.CodeInvalidLockDelay:     ErrInvalid,
	wire.CodeInvalidMode:          ErrInvalid,
	wire.CodeLockDelay:            ErrLockDelay,
	wire.CodeInvalidLimit:         ErrInvalid,
	wire.CodeInvalidValue:         ErrInvalid,
	wire.CodeSemaphoreFull:        ErrSemaphoreFull,
	wire.CodeLimitMismatch:        ErrLimitMismatch,
	wire.CodeNotFound:             ErrNotFound,
	wire.CodeEventsCompacted:      ErrEventsCompacted,
	wire.CodeUnknownToken:         ErrUnknownToken,
	wire.CodeNoLeader:             ErrNoLeader,
	wire.CodeOutcomeUnknown:       ErrOutcomeUnknown,
	wire.CodeMemberConflict:       ErrMemberConflict,
	wire.CodeUnknownMember:        ErrUnknownMember,
	wire.CodeTooManyWaiters:       ErrTooManyWaiters,
	wire.CodeTooManyLocks:         ErrTooManyLocks,
	wire.CodeRateLimited:          ErrRateLimited,
	wire.CodeTooManyWatches:       ErrRateLimited,
	wire.CodeUnknownSession:       ErrUnknownSession,
	wire.CodeSessionExpired:       ErrSessionExpired,
	wire.CodeSessionMismatch:      ErrSessionMismatch,
	wire.CodeSessionGrant:         ErrSessionGrant,
	wire.CodeMultiGrant:           ErrMultiGrant,
	wire.CodeInvalidNames:         ErrInvalid,
	wire.CodeRevoked:              ErrRevoked,
	wire.CodeUnauthorized:         ErrUnauthorized,
	wire.CodeKeyedMember:          ErrUnauthorized,
	wire.CodeForbidden:            ErrForbidden,
	wire.CodeTimeout:              ErrTimeout,
	wire.CodeInternal:             ErrInternal,
}

// APIError is an error answer from the server, or a request the client
// refused before sending because the server would refuse it (Status 400,
// with the code the server would give, so a caller, or a conformance
// agent, tells an invalid TTL from an invalid mode either way).
type APIError struct {
	Status  int    // HTTP status
	Code    string // wire.Code*; empty when the body was not an API error
	Message string
	// Holder and Token describe the current grant on lock_held, and Lock
	// names the lock (a multi-lock's first held name).
	Lock   string
	Holder string
	Token  uint64
	// LastToken is the key's high-water mark on stale_token.
	LastToken uint64
	// RetryAfter is the time left of the lock-delay on lock_delay.
	RetryAfter time.Duration
	// Oldest and Index are, on events_compacted, the lowest since the node
	// serves and its applied index.
	Oldest, Index uint64
	// Held and Limit are a semaphore's permits held and its limit, on
	// semaphore_full and limit_mismatch.
	Held, Limit int
	// Reason says why on unknown_token: wire.ReasonNotKept (older than
	// the history kept, or possibly a permit's from before it recorded
	// permits), wire.ReasonNeverGranted or wire.ReasonNoHistory.
	Reason string
}

func (e *APIError) Error() string {
	if e.Code == "" {
		return fmt.Sprintf("HTTP %d: %s", e.Status, e.Message)
	}
	return e.Code + ": " + e.Message
}

// Is makes errors.Is(err, ErrLockHeld) and friends true for the sentinel of
// e's code; any 400 matches ErrInvalid.
func (e *APIError) Is(target error) bool {
	if target == ErrInvalid && e.Status == http.StatusBadRequest {
		return true
	}
	if target == ErrLeaseLost && e.Code == wire.CodeRevoked {
		return true // a revoked grant is lost
	}
	s, ok := codeErrors[e.Code]
	return ok && s == target
}

// refuse is the client's own refusal of a request that the server would
// answer with 400 and code.
func refuse(code, format string, args ...any) error {
	return &APIError{Status: http.StatusBadRequest, Code: code, Message: fmt.Sprintf(format, args...)}
}

func newAPIError(status int, body []byte) *APIError {
	var wire wire.Error
	if err := json.Unmarshal(body, &wire); err != nil || wire.Code == "" {
		msg := string(body)
		if len(msg) > 200 {
			msg = msg[:200]
		}
		if msg == "" {
			msg = http.StatusText(status)
		}
		return &APIError{Status: status, Message: msg}
	}
	return &APIError{
		Status:    status,
		Code:      wire.Code,
		Message:   wire.Message,
		Lock:      wire.Lock,
		Holder:    wire.Holder,
		Token:     wire.Token,
		LastToken: wire.LastToken,

		RetryAfter: time.Duration(wire.RetryAfterMillis) * time.Millisecond,
		Oldest:     wire.Oldest,
		Index:      wire.Index,
		Held:       wire.Held,
		Limit:      wire.Limit,
		Reason:     wire.Reason,
	}
}

// answerError turns a non-2xx answer from base into an error: an *APIError,
// which a 404 without fencer's error body also wraps in ErrNotFencer, since
// every route of a fencer node, and its answer for unknown routes, carries
// one, and a status below 400 (a redirect: none is followed) wraps in
// ErrBadAnswer.
func answerError(base string, status int, body []byte) error {
	e := newAPIError(status, body)
	switch {
	case status < 400:
		return fmt.Errorf("%w: %s answered HTTP %d, neither a success nor an error (the client follows no redirect): %w", ErrBadAnswer, base, status, e)
	case e.Code == "" && status == http.StatusNotFound:
		return fmt.Errorf("%s is %w: it answered %w, without fencer's JSON error body", base, ErrNotFencer, e)
	}
	return e
}
