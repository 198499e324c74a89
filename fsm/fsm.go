// Package fsm is fencer's replicated state machine: it applies the commands
// of fsm/entry to the state (locks, semaphores, lock-delays, fenced keys and
// member addresses), answers reads of it, emits its events, and captures and
// restores it as snapshots (in fsm/snapshot's format). It is pure: no
// clock, no randomness, no raft handle. Everything a decision needs arrives
// in the command, so every replica that applies the same log reaches the
// same state.
//
// fsm holds the rules (who gets a lock, what is refused, which events an
// entry makes); the state's tables, each with its own bounds and derived
// counts, are in fsm/internal: locktable (held locks), permits
// (semaphores), kv (fenced keys), requests (request ids) and grants (the
// grant history). Why a command is refused is fsm/refusal's, a grant's
// secret fsm/secrets', and the events an entry reports fsm/event's.
//
// The fencing token of a grant is the log index of the entry that granted it
// (plus the epoch in the high bits, see entry.EpochShift). Only a Raft leader can
// commit an entry, so only the leader of a majority can mint a token, and all
// tokens of all locks share one strictly increasing sequence.
package fsm

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"

	"github.com/hashicorp/raft"

	"github.com/fencer-io/fencer/fsm/entry"
	"github.com/fencer-io/fencer/fsm/event"
)

// FSM implements raft.FSM.
type FSM struct {
	log *slog.Logger

	mu      sync.RWMutex
	s       *state
	applied uint64 // index of the last applied entry
	term    uint64 // term of the last applied entry
	obs     event.Observer
}

// New returns an empty FSM. A nil logger discards.
func New(logger *slog.Logger) *FSM {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &FSM{log: logger, s: newState()}
}

// AcquireResult is the Apply result of a successful Acquire.
type AcquireResult struct {
	Grant entry.Lock
	// Existing is true when the request id had already been granted and this
	// is that same grant returned again.
	Existing bool
}

// ReleaseResult is the Apply result of a Release or an effective Expire.
type ReleaseResult struct {
	Freed entry.Lock
	// Next is the grant handed to the queued waiter in the same entry, if any.
	Next *entry.Lock
	// NextErr is why the handoff did not happen (the lock is then free).
	NextErr error
	// Delay is the lock-delay an expiry started, if the grant asked for one.
	Delay *entry.Delay
}

// PutResult is the Apply result of a successful Put.
type PutResult struct {
	Key   string
	Token uint64
}

// DeleteKeyResult is the Apply result of a DeleteKey that removed a key.
type DeleteKeyResult struct {
	Key string
	// LastToken is the mark the key had.
	LastToken uint64
}

// Apply applies one committed log entry. The result is either an error (a
// refused command: lock held, lease lost, stale token) or one of the *Result
// types.
//
// A committed entry whose payload cannot be decoded is skipped by every
// replica alike (they all run the same decoder on the same bytes), logged, and
// answered with ErrMalformedCommand. An entry of an unknown type means a newer
// fencer wrote it: applying it as a no-op would diverge from the replicas that
// understand it, so Apply panics and the node stops until it is upgraded.
func (f *FSM) Apply(l *raft.Log) any {
	if l.Type != raft.LogCommand {
		f.mu.Lock()
		f.advanceLocked(l.Index, l.Term)
		if f.obs != nil {
			f.obs.Applied(l.Index, nil)
		}
		f.mu.Unlock()
		return nil
	}
	cmd, err := entry.Decode(l.Data)
	var unknown *entry.UnknownCommandError
	if errors.As(err, &unknown) {
		panic(fmt.Sprintf("fencer fsm: entry %d: %v", l.Index, err))
	}
	f.mu.Lock()
	var result any
	var events []event.Event
	if err != nil {
		f.log.Error("skipping malformed committed entry", "index", l.Index, "err", err)
		result = err
	} else {
		var existed bool
		if id, ok := memberID(cmd); ok {
			_, existed = f.s.members[id]
		}
		result = applyCommand(f.s, cmd, l.Index)
		if f.obs != nil {
			events = eventsOf(cmd, result, l.Index, existed)
		}
	}
	f.advanceLocked(l.Index, l.Term)
	if f.obs != nil {
		f.obs.Applied(l.Index, events)
	}
	f.mu.Unlock()
	return result
}

// ApplyCommand applies cmd as if committed at index. It is for tests and
// tools that replay commands without raft.
func (f *FSM) ApplyCommand(cmd entry.Command, index uint64) any {
	data, err := entry.Encode(cmd)
	if err != nil {
		return err
	}
	return f.Apply(&raft.Log{Index: index, Term: 1, Type: raft.LogCommand, Data: data})
}

func (f *FSM) advanceLocked(index, term uint64) {
	if index > f.applied {
		f.applied, f.term = index, term
	}
	if f.s.voided != nil && index > f.s.restoredAt {
		// Reported by every member that installed the restore's state;
		// a later state has nothing more to report.
		f.s.voided = nil
	}
}

// Snapshot captures the state for raft: a View, whose pointers are taken
// under the lock; sorting and writing it out happen outside.
func (f *FSM) Snapshot() (raft.FSMSnapshot, error) {
	return &raftSnapshot{v: f.View()}, nil
}

// Restore replaces the whole state with the snapshot's, atomically: the new
// state is built aside and swapped in only when it decoded completely.
func (f *FSM) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	s, h, err := readState(rc)
	if err != nil {
		return err
	}
	f.mu.Lock()
	boot := f.applied == 0
	f.s = s
	f.applied, f.term = h.AppliedIndex, h.Term
	if f.obs != nil {
		var events []event.Event
		if !boot {
			events = restoreEvents(s, f.applied)
		}
		f.obs.Restored(f.applied, boot, events)
	}
	f.mu.Unlock()
	return nil
}
