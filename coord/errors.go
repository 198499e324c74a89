package coord

import "errors"

// Refusals of the coordination layer. Raft's are cluster's (ErrNotLeader,
// ErrNoLeader, ErrOutcomeUnknown) and the state machine's are fsm's (lock
// held, lease lost, stale token); both pass through unchanged.
var (
	// ErrTooManyWaiters: the lock's wait queue, or all queues together, are
	// full.
	ErrTooManyWaiters = errors.New("too many waiters")
	// ErrTooManyLocks: the cluster, or this holder, holds the most locks
	// allowed.
	ErrTooManyLocks = errors.New("too many locks held")
	// ErrKVFull: the fenced store holds as many keys or value bytes as it
	// may, in all or from this principal.
	ErrKVFull = errors.New("fenced store full")
	// ErrUnknownToken: no grant with that token is in the grant history
	// (see TokenError).
	ErrUnknownToken = errors.New("unknown token")
)
