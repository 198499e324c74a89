package api

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"

	"github.com/fencer-io/fencer/cluster"
	"github.com/fencer-io/fencer/fsm"
)

// Machine-readable error codes. Clients depend on them exactly: add new
// ones, never rename.
const (
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
	CodeBodyTooLarge     = "body_too_large"
	CodeMissingToken     = "missing_token"
	CodeLockHeld         = "lock_held"
	CodeLeaseLost        = "lease_lost"
	CodeStaleToken       = "stale_token"
	CodeNotLockHolder    = "not_lock_holder"
	CodeNotFound         = "not_found"
	CodeNoLeader         = "no_leader"
	CodeOutcomeUnknown   = "outcome_unknown"
	CodeMemberConflict   = "member_conflict"
	CodeUnknownMember    = "unknown_member"
	CodeTooManyWaiters   = "too_many_waiters"
	CodeTooManyLocks     = "too_many_locks"
	CodeInvalidSnapshot  = "invalid_snapshot"
	CodeTimeout          = "timeout"
	CodeInternal         = "internal"
)

// Error is the body of every error response.
type Error struct {
	Message string `json:"error"`
	Code    string `json:"code"`
	// Holder and Token describe the current grant on lock_held.
	Holder string `json:"holder,omitempty"`
	Token  uint64 `json:"token,omitempty"`
	// LastToken is the key's high-water mark on stale_token.
	LastToken uint64 `json:"last_token,omitempty"`
}

func (e *Error) Error() string { return e.Code + ": " + e.Message }

// errorTable maps domain and cluster errors to a status and a code. It is the
// only place where statuses are chosen for errors.
var errorTable = []struct {
	err    error
	status int
	code   string
}{
	{fsm.ErrLockHeld, http.StatusConflict, CodeLockHeld},
	{fsm.ErrLeaseLost, http.StatusGone, CodeLeaseLost},
	{fsm.ErrStaleToken, http.StatusConflict, CodeStaleToken},
	{fsm.ErrNotLockHolder, http.StatusConflict, CodeNotLockHolder},
	{fsm.ErrTokenSpaceExhausted, http.StatusServiceUnavailable, CodeInternal},
	{cluster.ErrNotLeader, http.StatusServiceUnavailable, CodeNoLeader},
	{cluster.ErrNoLeader, http.StatusServiceUnavailable, CodeNoLeader},
	{cluster.ErrOutcomeUnknown, http.StatusServiceUnavailable, CodeOutcomeUnknown},
	{cluster.ErrMemberConflict, http.StatusConflict, CodeMemberConflict},
	{cluster.ErrUnknownMember, http.StatusNotFound, CodeUnknownMember},
	{cluster.ErrInvalidSnapshot, http.StatusBadRequest, CodeInvalidSnapshot},
	{cluster.ErrTooManyWaiters, http.StatusTooManyRequests, CodeTooManyWaiters},
	{cluster.ErrTooManyLocks, http.StatusTooManyRequests, CodeTooManyLocks},
	{context.DeadlineExceeded, http.StatusGatewayTimeout, CodeTimeout},
	{context.Canceled, http.StatusGatewayTimeout, CodeTimeout},
}

// writeErr writes err as the JSON error body with its status.
func writeErr(w http.ResponseWriter, err error) {
	var apiErr *Error
	if errors.As(err, &apiErr) {
		writeError(w, statusOf(apiErr.Code), apiErr)
		return
	}
	body := &Error{Message: err.Error(), Code: CodeInternal}
	status := http.StatusInternalServerError
	for _, e := range errorTable {
		if errors.Is(err, e.err) {
			body.Code, status = e.code, e.status
			break
		}
	}
	var held *fsm.HeldError
	if errors.As(err, &held) {
		body.Holder, body.Token = held.Holder, held.Token
	}
	var stale *fsm.StaleError
	if errors.As(err, &stale) {
		body.LastToken = stale.LastToken
	}
	writeError(w, status, body)
}

// statusOf returns the status of an error code produced at the edge.
func statusOf(code string) int {
	switch code {
	case CodeMissingToken:
		return http.StatusPreconditionRequired
	case CodeBodyTooLarge:
		return http.StatusRequestEntityTooLarge
	case CodeNotFound:
		return http.StatusNotFound
	}
	for _, e := range errorTable {
		if e.code == code {
			return e.status
		}
	}
	return http.StatusBadRequest
}

func writeError(w http.ResponseWriter, status int, body *Error) {
	if status == http.StatusServiceUnavailable {
		w.Header().Set("Retry-After", "1")
	}
	writeJSON(w, status, body)
}

func badRequest(code, msg string) *Error { return &Error{Code: code, Message: msg} }

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}
