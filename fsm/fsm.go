// Package fsm is fencer's replicated state machine: locks, fenced keys and
// member addresses. It is pure: no clock, no randomness, no raft handle.
// Everything a decision needs arrives in the command, so every replica that
// applies the same log reaches the same state.
//
// The fencing token of a grant is the log index of the entry that granted it
// (plus the epoch in the high bits, see EpochShift). Only a Raft leader can
// commit an entry, so only the leader of a majority can mint a token, and all
// tokens of all locks share one strictly increasing sequence.
package fsm

import (
	"crypto/subtle"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"

	"github.com/hashicorp/raft"
)

// FSM implements raft.FSM.
type FSM struct {
	log *slog.Logger

	mu      sync.RWMutex
	s       *state
	applied uint64 // index of the last applied entry
	term    uint64 // term of the last applied entry
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
	Grant Lock
	// Existing is true when the request id had already been granted and this
	// is that same grant returned again.
	Existing bool
}

// ReleaseResult is the Apply result of a Release or an effective Expire.
type ReleaseResult struct {
	Freed Lock
	// Next is the grant handed to the queued waiter in the same entry, if any.
	Next *Lock
	// NextErr is why the handoff did not happen (the lock is then free).
	NextErr error
}

// PutResult is the Apply result of a successful Put.
type PutResult struct {
	Key   string
	Token uint64
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
		f.mu.Unlock()
		return nil
	}
	cmd, err := Decode(l.Data)
	var unknown *UnknownCommandError
	if errors.As(err, &unknown) {
		panic(fmt.Sprintf("fencer fsm: entry %d: %v", l.Index, err))
	}
	f.mu.Lock()
	var result any
	if err != nil {
		f.log.Error("skipping malformed committed entry", "index", l.Index, "err", err)
		result = err
	} else {
		result = f.s.apply(cmd, l.Index)
	}
	f.advanceLocked(l.Index, l.Term)
	f.mu.Unlock()
	return result
}

// ApplyCommand applies cmd as if committed at index. It is for tests and
// tools that replay commands without raft.
func (f *FSM) ApplyCommand(cmd Command, index uint64) any {
	data, err := Encode(cmd)
	if err != nil {
		return err
	}
	return f.Apply(&raft.Log{Index: index, Term: 1, Type: raft.LogCommand, Data: data})
}

func (f *FSM) advanceLocked(index, term uint64) {
	if index > f.applied {
		f.applied, f.term = index, term
	}
}

func (s *state) apply(cmd Command, index uint64) any {
	switch c := cmd.(type) {
	case *Acquire:
		return s.applyAcquire(c, index)
	case *Release:
		return s.applyRelease(c, index)
	case *Expire:
		return s.applyExpire(c, index)
	case *Put:
		return s.applyPut(c)
	case *SetMember:
		s.members[c.ID] = c.Member
		return nil
	case *RemoveMember:
		delete(s.members, c.ID)
		return nil
	case *BumpEpoch:
		s.epoch++
		return s.epoch
	case *SetClusterID:
		if s.clusterID == "" {
			s.clusterID = c.ID
		}
		return s.clusterID
	}
	return fmt.Errorf("%w: no handler for %T", ErrMalformedCommand, cmd)
}

func (s *state) applyAcquire(c *Acquire, index uint64) any {
	if c.RequestID != "" {
		if token, ok := s.requests[requestKey(c.Lock, c.Holder, c.RequestID)]; ok {
			if cur, held := s.locks[c.Lock]; held && cur.token == token {
				return &AcquireResult{Grant: cur.lock(), Existing: true}
			}
			// The request was granted once and that grant has ended: never
			// mint a second token for the same request.
			return fmt.Errorf("%w: the grant for request %q (token %d) has already ended", ErrLeaseLost, c.RequestID, token)
		}
	}
	if cur, held := s.locks[c.Lock]; held {
		return &HeldError{Lock: c.Lock, Holder: cur.holder(), Token: cur.token}
	}
	return s.grant(c, index)
}

func (s *state) grant(c *Acquire, index uint64) any {
	if c.Lock == "" || c.TTLMillis <= 0 {
		// The API never proposes these; a lock without a name or TTL could
		// not be written to a snapshot and read back (Image.check).
		return fmt.Errorf("%w: acquire of lock %q with ttl %d ms", ErrMalformedCommand, c.Lock, c.TTLMillis)
	}
	if index > MaxIndex || s.epoch >= MaxEpoch {
		return ErrTokenSpaceExhausted
	}
	token := MakeToken(s.epoch, index)
	if token <= s.lastToken {
		// Cannot happen while log indexes increase; refuse rather than
		// issue a token that does not move forward.
		return fmt.Errorf("%w: token %d would not exceed %d", ErrTokenSpaceExhausted, token, s.lastToken)
	}
	s.lastToken = token
	e := newLockEntry(&Lock{
		Name:            c.Lock,
		Holder:          c.Holder,
		Token:           token,
		Lease:           c.Lease,
		TTLMillis:       c.TTLMillis,
		RequestID:       c.RequestID,
		GrantedAtMillis: c.NowMillis,
	})
	s.add(e)
	if c.RequestID != "" {
		s.remember(e.requestKey(), token)
	}
	return &AcquireResult{Grant: e.lock()}
}

func (s *state) applyRelease(c *Release, index uint64) any {
	cur, held := s.locks[c.Lock]
	if !held || cur.token != c.Token || !leaseEqual(cur.lease(), c.Lease) {
		return fmt.Errorf("%w: lock %q token %d", ErrLeaseLost, c.Lock, c.Token)
	}
	return s.free(cur, c.Next, index)
}

func (s *state) applyExpire(c *Expire, index uint64) any {
	cur, held := s.locks[c.Lock]
	if !held || cur.token != c.Token {
		return fmt.Errorf("%w: lock %q token %d already ended", ErrLeaseLost, c.Lock, c.Token)
	}
	return s.free(cur, c.Next, index)
}

func (s *state) free(cur *lockEntry, next *Acquire, index uint64) *ReleaseResult {
	res := &ReleaseResult{Freed: cur.lock()}
	name, holder := cur.name(), cur.holder()
	delete(s.locks, name)
	if s.byHolder[holder]--; s.byHolder[holder] <= 0 {
		delete(s.byHolder, holder)
	}
	if next == nil {
		return res
	}
	next.Lock = name
	switch r := s.applyAcquire(next, index).(type) {
	case *AcquireResult:
		res.Next = &r.Grant
	case error:
		res.NextErr = r
	}
	return res
}

// add puts a held lock in the state.
func (s *state) add(e *lockEntry) {
	s.locks[e.name()] = e
	s.byHolder[e.holder()]++
}

func (s *state) applyPut(c *Put) any {
	if c.Key == "" {
		return fmt.Errorf("%w: put without a key", ErrMalformedCommand)
	}
	if c.Token == 0 {
		return fmt.Errorf("%w: token 0 is never issued", ErrStaleToken)
	}
	if c.Lock != "" {
		cur, held := s.locks[c.Lock]
		if !held || cur.token != c.Token {
			return fmt.Errorf("%w: token %d is not the current grant of lock %q", ErrNotLockHolder, c.Token, c.Lock)
		}
	}
	if k, ok := s.keys[c.Key]; ok && c.Token <= k.Token {
		return &StaleError{Key: c.Key, Token: c.Token, LastToken: k.Token}
	}
	s.keys[c.Key] = &FencedKey{Key: c.Key, Value: c.Value, Token: c.Token}
	return &PutResult{Key: c.Key, Token: c.Token}
}

// leaseEqual compares lease secrets in constant time.
func leaseEqual(a, b string) bool {
	return subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1
}

// LeaseEqual compares lease secrets in constant time.
func LeaseEqual(a, b string) bool { return leaseEqual(a, b) }

// Snapshot captures the state for raft: a View, whose pointers are taken
// under the lock; sorting and writing it out happen outside.
func (f *FSM) Snapshot() (raft.FSMSnapshot, error) {
	return &snapshot{v: f.View()}, nil
}

// Restore replaces the whole state with the snapshot's, atomically: the new
// state is built aside and swapped in only when it decoded completely.
func (f *FSM) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	img, err := ReadImage(rc)
	if err != nil {
		return err
	}
	s := img.state()
	f.mu.Lock()
	f.s = s
	f.applied, f.term = img.Header.AppliedIndex, img.Header.Term
	f.mu.Unlock()
	return nil
}
