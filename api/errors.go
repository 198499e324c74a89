package api

import (
	"context"
	"encoding/json"
	"errors"
	"github.com/fencer-io/fencer/api/wire"
	"net/http"

	"github.com/fencer-io/fencer/cluster"
	"github.com/fencer-io/fencer/fsm"
)

// Machine-readable error codes, defined in package wire. Clients depend on
// them exactly: add new ones, never rename.
const (
	CodeInvalidName      = wire.CodeInvalidName
	CodeInvalidKey       = wire.CodeInvalidKey
	CodeInvalidTTL       = wire.CodeInvalidTTL
	CodeInvalidWait      = wire.CodeInvalidWait
	CodeInvalidHolder    = wire.CodeInvalidHolder
	CodeInvalidRequestID = wire.CodeInvalidRequestID
	CodeInvalidLease     = wire.CodeInvalidLease
	CodeInvalidToken     = wire.CodeInvalidToken
	CodeInvalidJSON      = wire.CodeInvalidJSON
	CodeInvalidMember    = wire.CodeInvalidMember
	CodeBodyTooLarge     = wire.CodeBodyTooLarge
	CodeMissingToken     = wire.CodeMissingToken
	CodeLockHeld         = wire.CodeLockHeld
	CodeLeaseLost        = wire.CodeLeaseLost
	CodeStaleToken       = wire.CodeStaleToken
	CodeNotLockHolder    = wire.CodeNotLockHolder
	CodeNotFound         = wire.CodeNotFound
	CodeNoLeader         = wire.CodeNoLeader
	CodeOutcomeUnknown   = wire.CodeOutcomeUnknown
	CodeMemberConflict   = wire.CodeMemberConflict
	CodeUnknownMember    = wire.CodeUnknownMember
	CodeTooManyWaiters   = wire.CodeTooManyWaiters
	CodeTooManyLocks     = wire.CodeTooManyLocks
	CodeInvalidSnapshot  = wire.CodeInvalidSnapshot
	CodeTimeout          = wire.CodeTimeout
	CodeInternal         = wire.CodeInternal
)

// Error is the body of every error response.
type Error = wire.Error

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
