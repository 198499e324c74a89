package api

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"

	"github.com/fencer-io/fencer/api/forward"
	"github.com/fencer-io/fencer/api/wire"
	"github.com/fencer-io/fencer/cluster"
	"github.com/fencer-io/fencer/coord"
	"github.com/fencer-io/fencer/coord/events"
	"github.com/fencer-io/fencer/fsm/entry"
	"github.com/fencer-io/fencer/fsm/refusal"
	"github.com/fencer-io/fencer/internal/limits"
)

// errorTable maps domain and cluster errors to a status and a code. It is the
// only place where statuses are chosen for errors.
var errorTable = []struct {
	err    error
	status int
	code   string
}{
	{refusal.ErrLockHeld, http.StatusConflict, wire.CodeLockHeld},
	{refusal.ErrLeaseLost, http.StatusGone, wire.CodeLeaseLost},
	{refusal.ErrStaleToken, http.StatusConflict, wire.CodeStaleToken},
	{refusal.ErrNotLockHolder, http.StatusConflict, wire.CodeNotLockHolder},
	{refusal.ErrUnissuedToken, http.StatusConflict, wire.CodeUnissuedToken},
	{refusal.ErrNoSuchKey, http.StatusNotFound, wire.CodeNotFound},
	{refusal.ErrLockDelay, http.StatusConflict, wire.CodeLockDelay},
	{refusal.ErrSemaphoreFull, http.StatusConflict, wire.CodeSemaphoreFull},
	{refusal.ErrLimitMismatch, http.StatusConflict, wire.CodeLimitMismatch},
	{refusal.ErrUnknownSession, http.StatusNotFound, wire.CodeUnknownSession},
	{refusal.ErrSessionExpired, http.StatusGone, wire.CodeSessionExpired},
	{refusal.ErrSessionMismatch, http.StatusConflict, wire.CodeSessionMismatch},
	{refusal.ErrSessionGrant, http.StatusConflict, wire.CodeSessionGrant},
	{refusal.ErrMultiGrant, http.StatusConflict, wire.CodeMultiGrant},
	{refusal.ErrRevoked, http.StatusGone, wire.CodeRevoked},
	{entry.ErrFormatTooOld, http.StatusConflict, wire.CodeUpgradeRequired},
	{refusal.ErrTokenSpaceExhausted, http.StatusServiceUnavailable, wire.CodeInternal},
	{cluster.ErrNotLeader, http.StatusServiceUnavailable, wire.CodeNoLeader},
	{cluster.ErrNoLeader, http.StatusServiceUnavailable, wire.CodeNoLeader},
	{cluster.ErrOutcomeUnknown, http.StatusServiceUnavailable, wire.CodeOutcomeUnknown},
	{cluster.ErrMemberConflict, http.StatusConflict, wire.CodeMemberConflict},
	{cluster.ErrUnknownMember, http.StatusNotFound, wire.CodeUnknownMember},
	{cluster.ErrInvalidSnapshot, http.StatusBadRequest, wire.CodeInvalidSnapshot},
	{cluster.ErrInvalidEpoch, http.StatusBadRequest, wire.CodeInvalidEpoch},
	{coord.ErrTooManyWaiters, http.StatusTooManyRequests, wire.CodeTooManyWaiters},
	{coord.ErrTooManyLocks, http.StatusTooManyRequests, wire.CodeTooManyLocks},
	{coord.ErrKVFull, http.StatusTooManyRequests, wire.CodeKVFull},
	{limits.ErrTooManyHeld, http.StatusTooManyRequests, wire.CodeTooManyWatches},
	{events.ErrCompacted, http.StatusGone, wire.CodeEventsCompacted},
	{context.DeadlineExceeded, http.StatusGatewayTimeout, wire.CodeTimeout},
	{context.Canceled, http.StatusGatewayTimeout, wire.CodeTimeout},
}

// writeErr writes err as the JSON error body with its status. A request
// that found this node no longer leads, having done nothing, goes to the
// leader instead when it can (see forward.Reroute).
func writeErr(w http.ResponseWriter, err error) {
	if errors.Is(err, cluster.ErrNotLeader) && forward.Reroute(w) {
		return
	}
	var apiErr *wire.Error
	if errors.As(err, &apiErr) {
		writeError(w, statusOf(apiErr.Code), apiErr)
		return
	}
	body := &wire.Error{Message: err.Error(), Code: wire.CodeInternal}
	status := http.StatusInternalServerError
	for _, e := range errorTable {
		if errors.Is(err, e.err) {
			body.Code, status = e.code, e.status
			break
		}
	}
	var held *refusal.HeldError
	if errors.As(err, &held) {
		body.Lock, body.Holder, body.Token = held.Lock, held.Holder, held.Token
	}
	var stale *refusal.StaleError
	if errors.As(err, &stale) {
		body.LastToken = stale.LastToken
	}
	var full *refusal.FullError
	if errors.As(err, &full) {
		body.Held, body.Limit = full.Held, full.Limit
	}
	var mismatch *refusal.LimitError
	if errors.As(err, &mismatch) {
		body.Held, body.Limit = mismatch.Held, mismatch.Limit
	}
	var delayed *coord.DelayedError
	if errors.As(err, &delayed) {
		body.RetryAfterMillis = max(delayed.Remaining.Milliseconds(), 1)
	}
	var compacted *events.CompactedError
	if errors.As(err, &compacted) {
		body.Oldest, body.Index = compacted.Oldest, compacted.Index
	}
	writeError(w, status, body)
}

// statusOf returns the status of an error code produced at the edge.
func statusOf(code string) int {
	switch code {
	case wire.CodeMissingToken:
		return http.StatusPreconditionRequired
	case wire.CodeBodyTooLarge:
		return http.StatusRequestEntityTooLarge
	case wire.CodeNotFound:
		return http.StatusNotFound
	case wire.CodeUnsupportedMediaType:
		return http.StatusUnsupportedMediaType
	case wire.CodeUnauthorized:
		return http.StatusUnauthorized
	case wire.CodeForbidden:
		return http.StatusForbidden
	case wire.CodeRateLimited:
		return http.StatusTooManyRequests
	}
	for _, e := range errorTable {
		if e.code == code {
			return e.status
		}
	}
	return http.StatusBadRequest
}

// writeError writes body with status. A 503 says when to retry: at once
// after outcome_unknown (the leader vanished mid-request; any member holds
// a retry until the next leader is known, so waiting gains nothing), a
// second later after no_leader (this node waited for a leader and found
// none: no quorum, or an election that fails).
func writeError(w http.ResponseWriter, status int, body *wire.Error) {
	if status == http.StatusServiceUnavailable {
		retry := "1"
		if body.Code == wire.CodeOutcomeUnknown {
			retry = "0"
		}
		w.Header().Set("Retry-After", retry)
	}
	wire.WriteError(w, status, body)
}

// handleJSON adapts a handler that returns the body of its 200 answer or the
// error to answer instead: the body is written as JSON, the error as
// writeErr writes it (and the body is then not looked at).
func handleJSON(h func(w http.ResponseWriter, r *http.Request) (any, error)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		body, err := h(w, r)
		if err != nil {
			writeErr(w, err)
			return
		}
		writeJSON(w, http.StatusOK, body)
	}
}

func badRequest(code, msg string) *wire.Error { return &wire.Error{Code: code, Message: msg} }

// jsonContentType is the Content-Type of every JSON answer, shared: the
// server only reads a header's values.
var jsonContentType = []string{"application/json"}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header()["Content-Type"] = jsonContentType
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}
