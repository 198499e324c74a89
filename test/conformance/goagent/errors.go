package main

import (
	"context"
	"errors"

	"github.com/fencer-io/fencer/api/client"
)

// errHarness is a request the agent cannot run (an unknown handle or op):
// the harness's mistake, not the client's.
var errHarness = errors.New("harness error")

// errUnsupported is an op the Go client has no call for.
var errUnsupported = errors.New("unsupported by the Go client")

// sentinel is one of the client's errors, by the name a caller uses.
type sentinel struct {
	name string
	err  error
}

// sentinels lists the client's errors, the more specific first (ErrRevoked
// and ErrLeaseExpired before ErrLeaseLost, which they match too): an
// error's class is the first it matches.
var sentinels = []sentinel{
	{"ErrRevoked", client.ErrRevoked},
	{"ErrLeaseExpired", client.ErrLeaseExpired},
	{"ErrSessionExpired", client.ErrSessionExpired},
	{"ErrLeaseLost", client.ErrLeaseLost},
	{"ErrReleased", client.ErrReleased},
	{"ErrLockHeld", client.ErrLockHeld},
	{"ErrStaleToken", client.ErrStaleToken},
	{"ErrNotLockHolder", client.ErrNotLockHolder},
	{"ErrUnissuedToken", client.ErrUnissuedToken},
	{"ErrKVFull", client.ErrKVFull},
	{"ErrLockDelay", client.ErrLockDelay},
	{"ErrSemaphoreFull", client.ErrSemaphoreFull},
	{"ErrLimitMismatch", client.ErrLimitMismatch},
	{"ErrUnknownSession", client.ErrUnknownSession},
	{"ErrSessionMismatch", client.ErrSessionMismatch},
	{"ErrSessionGrant", client.ErrSessionGrant},
	{"ErrMultiGrant", client.ErrMultiGrant},
	{"ErrUpgradeRequired", client.ErrUpgradeRequired},
	{"ErrMissingToken", client.ErrMissingToken},
	{"ErrNoLeader", client.ErrNoLeader},
	{"ErrOutcomeUnknown", client.ErrOutcomeUnknown},
	{"ErrNotFencer", client.ErrNotFencer},
	{"ErrUnknownToken", client.ErrUnknownToken},
	{"ErrNotFound", client.ErrNotFound},
	{"ErrInvalid", client.ErrInvalid},
	{"ErrTooManyWaiters", client.ErrTooManyWaiters},
	{"ErrTooManyLocks", client.ErrTooManyLocks},
	{"ErrRateLimited", client.ErrRateLimited},
	{"ErrUnauthorized", client.ErrUnauthorized},
	{"ErrForbidden", client.ErrForbidden},
	{"ErrHostNotAllowed", client.ErrHostNotAllowed},
	{"ErrMemberConflict", client.ErrMemberConflict},
	{"ErrUnknownMember", client.ErrUnknownMember},
	{"ErrEventsCompacted", client.ErrEventsCompacted},
	{"ErrTimeout", client.ErrTimeout},
	{"ErrInternal", client.ErrInternal},
	{"ErrUnavailable", client.ErrUnavailable},
	{"ErrBadAnswer", client.ErrBadAnswer},
}

// classify returns the protocol's code and class of err: the server's code
// when it answered one, else the code of the client's own error.
func classify(err error) (code, class string) {
	class = "error"
	for _, s := range sentinels {
		if errors.Is(err, s.err) {
			class = s.name
			break
		}
	}
	var apiErr *client.APIError
	switch {
	case errors.Is(err, errHarness):
		return "harness", "errHarness"
	case errors.Is(err, errUnsupported):
		return "unsupported", "errUnsupported"
	case errors.Is(err, client.ErrBadAnswer):
		return "bad_answer", class
	case errors.As(err, &apiErr) && apiErr.Code != "":
		return apiErr.Code, class
	case errors.Is(err, client.ErrLeaseExpired), errors.Is(err, client.ErrReleased):
		return "lease_lost", class
	case errors.Is(err, client.ErrNotFound):
		return "not_found", class
	case errors.Is(err, client.ErrOutcomeUnknown):
		return "outcome_unknown", class
	case errors.Is(err, client.ErrUnavailable):
		return "unavailable", class
	case errors.Is(err, context.DeadlineExceeded):
		return "timeout", "context.DeadlineExceeded"
	}
	return "unknown", class
}
