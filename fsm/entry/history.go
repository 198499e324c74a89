package entry

import "fmt"

// The grant history's command and records (fsm/internal/grants keeps the
// history; fsm/DESIGN.md, "The grant history", says why it is built so).

// Ways a grant ends, as GrantRecord.Ended says them ("" while still held).
const (
	EndReleased  = "released"
	EndExpired   = "expired"
	EndHandedOff = "handed_off"
	EndVoided    = "voided"
)

// Bounds of the history's settings: SetGrantHistory outside them is refused.
const (
	MaxGrantHistory        = 10_000_000
	MaxGrantHistoryPerLock = 1024
)

// Defaults of the history's settings, proposed by a cluster's first leader
// when its flags do not say otherwise.
const (
	DefaultGrantHistory        = 100_000
	DefaultGrantHistoryPerLock = 16
)

// GrantHistorySettings size the grant history. They are the cluster's, in
// the replicated state, set by SetGrantHistory (a node's flags only propose
// them, once).
type GrantHistorySettings struct {
	// PerLock is how many of each lock's grants are kept.
	PerLock int `json:"per_lock"`
	// Global is how many of the cluster's last grants are kept for token
	// lookups, and how many locks keep a history (0: no history at all).
	Global int `json:"global"`
}

// Validate refuses settings outside the bounds.
func (g GrantHistorySettings) Validate() error {
	if g.Global < 0 || g.Global > MaxGrantHistory {
		return fmt.Errorf("grant history of %d grants: want 0 to %d", g.Global, MaxGrantHistory)
	}
	if g.PerLock < 0 || g.PerLock > MaxGrantHistoryPerLock {
		return fmt.Errorf("grant history of %d grants per lock: want 0 to %d", g.PerLock, MaxGrantHistoryPerLock)
	}
	return nil
}

// SetGrantHistory fixes the cluster's grant history settings (the first
// one starts the history at its entry), or changes them: the history then
// keeps what the new settings keep of what it had.
type SetGrantHistory struct {
	GrantHistorySettings
}

func (*SetGrantHistory) Type() CommandType { return CmdSetGrantHistory }

// GrantRecord is one grant as the history keeps it.
type GrantRecord struct {
	Token        uint64 `json:"token"`
	Lock         string `json:"lock"`
	Holder       string `json:"holder"`
	GrantedIndex uint64 `json:"granted_index"`
	// Ended is how the grant ended (EndReleased, …), "" while it is held.
	Ended      string `json:"ended,omitempty"`
	EndedIndex uint64 `json:"ended_index,omitempty"`
}

// VoidedGrant is a grant that a restore or recovery dropped: the state it
// installs keeps them (snapshot.Image.Voided) so that every member that
// installs it reports the same voided events, whatever it held before.
type VoidedGrant struct {
	Lock   string `json:"lock"`
	Holder string `json:"holder"`
	Token  uint64 `json:"token"`
}
