package fsm

import (
	"fmt"

	"github.com/fencer-io/fencer/fsm/entry"
	"github.com/fencer-io/fencer/fsm/internal/grants"
)

// The grant history (fsm/internal/grants) answers, after the fact, "whose
// write was token T?" and "who held lock L, or a permit of semaphore S,
// lately?". The state feeds it
// each grant and each end from applied entries only, and snapshots carry
// it, so that every member answers the same (see DESIGN.md, "The grant
// history").

// TokenLookup says why a token is not in the history.
type TokenLookup int

const (
	// TokenFound: the grant is in the history.
	TokenFound TokenLookup = iota
	// TokenNotKept: the token may have been a grant, older than the
	// history reaches (or granted before the cluster kept one).
	TokenNotKept
	// TokenNeverIssued: no grant has had this token; it is above every
	// token issued, or within the history's reach and neither a lock's
	// grant nor a permit's.
	TokenNeverIssued
	// TokenNoHistory: the cluster keeps no grant history (not yet
	// configured, or configured with a size of 0).
	TokenNoHistory
	// TokenPermitNotKept: within the history's reach and no lock's grant,
	// but it may have been a semaphore permit's, granted before the
	// history recorded permits.
	TokenPermitNotKept
)

// GrantOf returns the grant that had token, or why it cannot.
func (f *FSM) GrantOf(token uint64) (entry.GrantRecord, TokenLookup) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	h := f.s.history
	switch {
	case token == 0 || token > f.s.lastToken:
		return entry.GrantRecord{}, TokenNeverIssued
	case h == nil || h.Settings().Global == 0:
		return entry.GrantRecord{}, TokenNoHistory
	case token < h.From():
		return entry.GrantRecord{}, TokenNotKept
	}
	if g := h.Find(token); g != nil {
		return h.RecordOf(g), TokenFound
	}
	if !h.Accounts(token) {
		return entry.GrantRecord{}, TokenPermitNotKept
	}
	return entry.GrantRecord{}, TokenNeverIssued
}

// GrantHistory returns up to n of lock's last grants, newest first, and the
// applied index they were read at.
func (f *FSM) GrantHistory(lock string, n int) ([]entry.GrantRecord, uint64) {
	return f.lastGrants(grants.OfLock, lock, n)
}

// PermitHistory returns up to n of the last permits of semaphore sem,
// newest first, and the applied index they were read at (none before the
// cluster records permits: GrantHistorySettings().Permits).
func (f *FSM) PermitHistory(sem string, n int) ([]entry.GrantRecord, uint64) {
	return f.lastGrants(grants.OfPermit, sem, n)
}

func (f *FSM) lastGrants(kind grants.Kind, name string, n int) ([]entry.GrantRecord, uint64) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	if f.s.history == nil {
		return nil, f.applied
	}
	return f.s.history.Last(kind, name, n), f.applied
}

// permitHistory is the history when it records permits, else nil: a
// cluster whose settings lack Permits (written before
// entry.LogFormatPermitHistory, or while a member could not read it)
// records none, as its older members do.
func (s *state) permitHistory() *grants.History {
	if s.history != nil && s.history.Settings().Permits {
		return s.history
	}
	return nil
}

// GrantHistorySettings returns the cluster's history settings, and false
// while it has none (not yet set by its leader, or an older cluster's log).
func (f *FSM) GrantHistorySettings() (entry.GrantHistorySettings, bool) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	if f.s.history == nil {
		return entry.GrantHistorySettings{}, false
	}
	return f.s.history.Settings(), true
}

// applySetGrantHistory fixes the settings (the first starts the history
// at its entry) or changes them: the history then keeps what the new
// settings keep of what it had, and permits from this entry on when the
// new settings are the first to ask for them (only set-grant-history's
// form of entry.LogFormatPermitHistory can).
func applySetGrantHistory(s *state, c *entry.SetGrantHistory, index uint64) any {
	if err := c.Validate(); err != nil {
		return fmt.Errorf("%w: %v", entry.ErrMalformedCommand, err)
	}
	cfg, at := c.GrantHistorySettings, entry.MakeToken(s.epoch, index)
	if s.history == nil {
		s.history = grants.New(cfg, at)
		return cfg
	}
	old := s.history.Settings()
	// Once recorded, permits stay recorded: no build proposes otherwise,
	// and a history that forgot them from an entry on would answer
	// "never granted" for tokens it once held.
	cfg.Permits = cfg.Permits || old.Permits
	if old != cfg {
		s.history = s.history.Resize(cfg)
	}
	if cfg.Permits && !old.Permits {
		s.history.RecordsPermits(at)
	}
	return cfg
}
