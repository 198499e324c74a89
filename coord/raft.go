package coord

import "github.com/fencer-io/fencer/fsm/entry"

// Raft is what the coordination layer needs of the Raft node: cluster.Node,
// or in tests a fake that applies commands in order to a real fsm.FSM. Its
// errors are cluster's (ErrNotLeader, ErrNoLeader, ErrOutcomeUnknown); a
// command the FSM refuses comes back as the FSM's error.
type Raft interface {
	// Apply proposes cmd and returns the FSM's result once it is applied.
	Apply(cmd entry.Command) (any, error)
	// VerifyLeader confirms with a quorum round that this node still leads.
	VerifyLeader() error
	// Barrier returns once the FSM has applied every entry committed before
	// the call.
	Barrier() error
	// Leadership reports whether this node leads, and a channel closed when
	// that view ends: leadership changed, or the state was replaced (a
	// restore). Leader-only work belongs to one view.
	Leadership() (leader bool, changed <-chan struct{})
	// EntryFormat is the log format Apply writes now: the newest every
	// member has recorded (entry.LogFormat*). Below entry.LogFormatPrincipal
	// entries carry no principal and key deletes cannot be written.
	EntryFormat() int
	// Ready returns the log format the members read once this node can
	// serve every command they read (a leader is known, this node is caught
	// up, the cluster is named and every member's format recorded), or why
	// not (cluster.ErrNoLeader).
	Ready() (format int, err error)
}
