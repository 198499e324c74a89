package entry

import (
	"encoding/json"
	"fmt"
)

// The grant history's command and records (fsm/internal/grants keeps the
// history; fsm/DESIGN.md, "The grant history", says why it is built so).

// Ways a grant ends, as GrantRecord.Ended says them ("" while still held).
const (
	EndReleased  = "released"
	EndExpired   = "expired"
	EndHandedOff = "handed_off"
	EndVoided    = "voided"
	// EndRevoked: an operator revoked the grant (snapshot version 6).
	EndRevoked = "revoked"
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
	// lookups, and how many locks and semaphores keep a history (0: no
	// history at all).
	Global int `json:"global"`
	// Permits: semaphore permits are recorded beside lock grants, from the
	// entry that first set it on; PerLock then bounds each semaphore's
	// history too, and permits count in Global. It is not a node's
	// choice: every build that records permits proposes it, once every
	// member reads it. Only set-grant-history's form of
	// LogFormatPermitHistory carries it (type 24), never the JSON of type
	// 23, which older builds would apply without it; a snapshot says it
	// with its header's permits_from.
	Permits bool `json:"-"`
}

// Sizes returns the settings without Permits: what a node's flags set.
func (g GrantHistorySettings) Sizes() GrantHistorySettings {
	return GrantHistorySettings{PerLock: g.PerLock, Global: g.Global}
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

// permitHistoryPayload is the payload of set-grant-history's form of
// LogFormatPermitHistory (type 24): its settings with permits. The field
// has a type byte of its own because an older build would drop it from a
// type-23 entry and keep no permits, diverging from the other members; an
// unknown type byte stops it instead.
type permitHistoryPayload struct {
	PerLock int  `json:"per_lock"`
	Global  int  `json:"global"`
	Permits bool `json:"permits"`
}

func readPermitHistory(payload []byte) (*SetGrantHistory, error) {
	var p permitHistoryPayload
	if err := json.Unmarshal(payload, &p); err != nil {
		return nil, err
	}
	return &SetGrantHistory{GrantHistorySettings{PerLock: p.PerLock, Global: p.Global, Permits: p.Permits}}, nil
}

func appendPermitHistory(b []byte, c *SetGrantHistory) []byte {
	// Marshalling ints and a bool cannot fail.
	payload, _ := json.Marshal(permitHistoryPayload{PerLock: c.PerLock, Global: c.Global, Permits: c.Permits})
	return append(b, payload...)
}

// GrantRecord is one grant as the history keeps it: of a lock, or of a
// semaphore's permit (Semaphore set, Lock empty).
type GrantRecord struct {
	Token uint64 `json:"token"`
	// Lock is never empty for a lock's grant, so omitempty leaves those
	// records byte for byte as before permits were recorded.
	Lock         string `json:"lock,omitempty"`
	Semaphore    string `json:"semaphore,omitempty"`
	Holder       string `json:"holder"`
	GrantedIndex uint64 `json:"granted_index"`
	// Ended is how the grant ended (EndReleased, …), "" while it is held.
	Ended      string `json:"ended,omitempty"`
	EndedIndex uint64 `json:"ended_index,omitempty"`
	// Mode is ModeShared for a lock's shared grant ("" otherwise, so that
	// every older record reads as before; snapshot version 6).
	Mode string `json:"mode,omitempty"`
	// Names are a multi-grant's lock names, in the order asked (Lock is
	// the first), absent for any other grant: it is one record, and every
	// name's history shows it.
	Names []string `json:"names,omitempty"`
}

// VoidedGrant is a grant that a restore or recovery dropped: the state it
// installs keeps them (snapshot.Image.Voided) so that every member that
// installs it reports the same voided events, whatever it held before.
type VoidedGrant struct {
	Lock string `json:"lock"`
	// Semaphore names a voided permit's semaphore (its Lock is "").
	Semaphore string `json:"semaphore,omitempty"`
	Holder    string `json:"holder"`
	Token     uint64 `json:"token"`
}
