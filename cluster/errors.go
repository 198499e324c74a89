package cluster

import (
	"errors"
	"fmt"

	"github.com/hashicorp/raft"

	"github.com/fencer-io/fencer/cluster/internal/membership"
	"github.com/fencer-io/fencer/cluster/internal/restore"
)

// Cluster errors. Domain refusals (lock held, lease lost, stale token) are
// fsm's errors and pass through unchanged.
var (
	// ErrNotLeader: this node is not the leader; the caller should go to it.
	ErrNotLeader = errors.New("this node is not the leader")
	// ErrNoLeader: no leader is known (election in progress, or no quorum).
	ErrNoLeader = errors.New("no leader")
	// ErrOutcomeUnknown: the command was proposed but leadership was lost
	// before its outcome was known; it may or may not have been committed.
	// Retry an acquire with the same request id to learn its outcome.
	ErrOutcomeUnknown = errors.New("outcome unknown: leadership lost while the command was in flight")
	// ErrMemberConflict: a join or add conflicts with an existing member.
	ErrMemberConflict = membership.ErrConflict
	// ErrUnknownMember: no member has that id.
	ErrUnknownMember = errors.New("unknown member")
	// ErrInvalidSnapshot: a backup could not be read, or no log could
	// have written it.
	ErrInvalidSnapshot = restore.ErrInvalidSnapshot
	// ErrInvalidEpoch: a restore or recovery would move the token epoch
	// past entry.LastEpoch, leaving no token to issue.
	ErrInvalidEpoch = restore.ErrInvalidEpoch
)

// translate maps raft's errors to the cluster's.
func translate(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, raft.ErrNotLeader), errors.Is(err, raft.ErrLeadershipTransferInProgress):
		return fmt.Errorf("%w: %v", ErrNotLeader, err)
	case errors.Is(err, raft.ErrLeadershipLost), errors.Is(err, raft.ErrAbortedByRestore):
		return fmt.Errorf("%w: %v", ErrOutcomeUnknown, err)
	case errors.Is(err, raft.ErrEnqueueTimeout), errors.Is(err, raft.ErrRaftShutdown):
		return fmt.Errorf("%w: %v", ErrNoLeader, err)
	}
	return err
}
