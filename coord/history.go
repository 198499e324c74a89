package coord

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/fencer-io/fencer/cluster"
	"github.com/fencer-io/fencer/fsm"
	"github.com/fencer-io/fencer/fsm/entry"
)

// The grant history is replicated state (fsm/history.go). Its reads are
// linearizable unless stale, as every read is: a leader confirms it still
// leads before it answers, so that "never granted", "not kept" or a
// history without a grant the caller was given is never this node's lag
// (a follower answered never_granted for a token it had not applied yet).
// Each returns the applied index it was read at.

// historySettle is how often a node looks whether the cluster's history
// settings are applied yet, and whether, as its leader, it can propose them.
const historySettle = time.Second

// TokenError is a token lookup the history cannot answer: why (never
// issued, older than kept, or no history) is Lookup.
type TokenError struct {
	Token  uint64
	Lookup fsm.TokenLookup
	// Settings are the cluster's history settings (zero without any).
	Settings entry.GrantHistorySettings
}

func (e *TokenError) Error() string {
	switch e.Lookup {
	case fsm.TokenNotKept:
		return fmt.Sprintf("%v: token %d is older than the grant history this cluster keeps (its last %d grants)", ErrUnknownToken, e.Token, e.Settings.Global)
	case fsm.TokenNoHistory:
		return fmt.Sprintf("%v: this cluster keeps no grant history (--grant-history 0, or not every member runs a build that keeps one yet)", ErrUnknownToken)
	case fsm.TokenPermitNotKept:
		return fmt.Sprintf("%v: no lock was granted with token %d; it may be a semaphore permit's from before this cluster's grant history recorded permits (every member must run a build that records them)", ErrUnknownToken, e.Token)
	}
	return fmt.Sprintf("%v: no lock or semaphore permit was granted with token %d", ErrUnknownToken, e.Token)
}

func (e *TokenError) Unwrap() error { return ErrUnknownToken }

// History returns up to n of lock's last grants, newest first, and the
// applied index they were read at; linearizable unless stale.
func (s *Service) History(ctx context.Context, lock string, n int, stale bool) ([]entry.GrantRecord, uint64, error) {
	if !stale {
		if err := s.linearizable(ctx); err != nil {
			return nil, 0, err
		}
	}
	grants, index := s.fsm.GrantHistory(lock, n)
	return grants, index, nil
}

// SemaphoreHistory returns up to n of semaphore sem's last permits, newest
// first, and the applied index they were read at; linearizable unless
// stale.
func (s *Service) SemaphoreHistory(ctx context.Context, sem string, n int, stale bool) ([]entry.GrantRecord, uint64, error) {
	if !stale {
		if err := s.linearizable(ctx); err != nil {
			return nil, 0, err
		}
	}
	permits, index := s.fsm.PermitHistory(sem, n)
	return permits, index, nil
}

// AppliedIndex is the index of the last entry this node applied.
func (s *Service) AppliedIndex() uint64 { return s.fsm.AppliedIndex() }

// Grant returns the grant (a lock's or a semaphore permit's) that had
// token, or a *TokenError, and the applied index it was read at;
// linearizable unless stale.
func (s *Service) Grant(ctx context.Context, token uint64, stale bool) (entry.GrantRecord, uint64, error) {
	if !stale {
		if err := s.linearizable(ctx); err != nil {
			return entry.GrantRecord{}, 0, err
		}
	}
	index := s.fsm.AppliedIndex()
	g, why := s.fsm.GrantOf(token)
	if why == fsm.TokenFound {
		return g, index, nil
	}
	cfg, _ := s.fsm.GrantHistorySettings()
	return g, index, &TokenError{Token: token, Lookup: why, Settings: cfg}
}

// prepare puts the cluster's grant-history settings in the log, when it
// has none (or records no permits) and every member reads them, before a
// new leader serves anyone: so the first grant of a new cluster, a lock's
// or a permit's, is in the history. It waits (an
// error, retried) until the node is ready, when the members' formats are
// known; in a mixed-version cluster whose members do not all read the
// settings yet it leaves them to settleHistory.
func (s *Service) prepare() error {
	if s.cfg.GrantHistory == nil {
		return nil
	}
	cur, ok := s.fsm.GrantHistorySettings()
	if ok && cur.Permits {
		return nil
	}
	format, err := s.raft.Ready()
	if err != nil {
		return err
	}
	next, propose := historyProposal(cur, ok, s.cfg.GrantHistory.Sizes(), format)
	if !propose {
		return nil
	}
	if _, err := s.raft.Apply(&entry.SetGrantHistory{GrantHistorySettings: next}); err != nil {
		return err
	}
	s.log.Info("the cluster keeps a grant history", "grant_history", next.Global, "grant_history_per_lock", next.PerLock, "permits", next.Permits)
	return nil
}

// Ready returns the log format the members read once this node can serve
// every command of it: the node is ready (Raft.Ready) and, where the
// members read them, the cluster's grant-history settings are applied, so
// that a grant made through this node is in the history. The error says
// why not (cluster.ErrNoLeader).
func (s *Service) Ready() (int, error) {
	format, err := s.raft.Ready()
	if err != nil {
		return 0, err
	}
	if s.cfg.GrantHistory != nil && format >= entry.LogFormatHistory {
		if _, ok := s.fsm.GrantHistorySettings(); !ok {
			return 0, fmt.Errorf("%w: the cluster's grant-history settings are not applied here yet", cluster.ErrNoLeader)
		}
	}
	return format, nil
}

// settleHistory runs on every node until the cluster's history settings
// are applied and record semaphore permits. Its leader proposes this
// node's (Config.GrantHistory) as soon as every member reads the entry
// (entry.LogFormatHistory), so a cluster's sizes are those of its first
// leader of a build that keeps a history; with permits when every member
// also reads entry.LogFormatPermitHistory, and otherwise, once they all
// do, the cluster's own sizes again with permits (an upgraded cluster
// starts recording them there). A node whose own sizes differ says so in
// its log, once: they are the cluster's, changed only through the log,
// never by a node's flags.
//
// Close does not wait for it: its proposal can block for as long as the
// log store does (a stalled disk), and the node must still be able to
// stop. It returns at the next tick after Close, once Raft answers.
func (s *Service) settleHistory(want entry.GrantHistorySettings) {
	want = want.Sizes()
	tick := time.NewTicker(historySettle)
	defer tick.Stop()
	warned := false
	for {
		// Readiness first: a new leader's prepare proposes the settings
		// before it is ready, so once ready they are read here, and not
		// proposed a second time.
		ready := s.leader.Ready()
		cfg, ok := s.fsm.GrantHistorySettings()
		if ok && !warned && cfg.Sizes() != want {
			warned = true
			s.log.Warn("this node's grant history settings are not the cluster's, which stay in force (they were fixed when the cluster first kept a history)",
				"grant_history", want.Global, "grant_history_per_lock", want.PerLock,
				"cluster_grant_history", cfg.Global, "cluster_grant_history_per_lock", cfg.PerLock)
		}
		if ok && cfg.Permits {
			return
		}
		if next, propose := historyProposal(cfg, ok, want, s.raft.EntryFormat()); propose && ready {
			_, err := s.raft.Apply(&entry.SetGrantHistory{GrantHistorySettings: next})
			if err == nil {
				s.log.Info("the cluster keeps a grant history", "grant_history", next.Global, "grant_history_per_lock", next.PerLock, "permits", next.Permits)
				continue
			}
			if !errors.Is(err, entry.ErrFormatTooOld) {
				s.log.Warn("proposing the grant history settings failed; retrying", "err", err)
			}
		}
		select {
		case <-s.stop:
			return
		case <-tick.C:
		}
	}
}

// historyProposal returns the settings a leader proposes when the
// cluster's are cur (set: ok) and its members read format, and whether it
// proposes any: want with permits if the members read them, without
// otherwise; for a cluster that has settings without permits, its own
// sizes with permits, once the members read them.
func historyProposal(cur entry.GrantHistorySettings, ok bool, want entry.GrantHistorySettings, format int) (entry.GrantHistorySettings, bool) {
	permits := format >= entry.LogFormatPermitHistory
	switch {
	case !ok && format >= entry.LogFormatHistory:
		want.Permits = permits
		return want, true
	case ok && !cur.Permits && permits:
		cur.Permits = true
		return cur, true
	}
	return entry.GrantHistorySettings{}, false
}

// WaitLock returns once lock's state changed after index (an event of
// the lock with a higher index), when wait ends, or at once when the
// node's events after index are no longer kept (the state may have
// changed: a spurious wake-up, as Consul's blocking queries allow), or
// when until is closed (the caller's authorisation changed). It says
// whether it saw a change.
func (s *Service) WaitLock(ctx context.Context, lock string, index uint64, wait time.Duration, until <-chan struct{}) (bool, error) {
	return s.events.WaitLock(ctx, lock, index, wait, s.stop, until)
}

// GrantHistorySettings returns the cluster's grant history settings, false
// while it has none.
func (s *Service) GrantHistorySettings() (entry.GrantHistorySettings, bool) {
	return s.fsm.GrantHistorySettings()
}
