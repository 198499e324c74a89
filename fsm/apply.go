package fsm

import (
	"fmt"

	"github.com/fencer-io/fencer/fsm/entry"
	"github.com/fencer-io/fencer/fsm/internal/grants"
	"github.com/fencer-io/fencer/fsm/internal/locktable"
	"github.com/fencer-io/fencer/fsm/internal/sessions"
	"github.com/fencer-io/fencer/fsm/refusal"
	"github.com/fencer-io/fencer/fsm/secrets"
)

// appliers holds the one apply function of each command type (entry's
// commands table has its name and encodings). Each runs under FSM.mu with
// the index of the entry that carries it and returns the Apply result: one
// of the *Result types, nil, or a refusal (an error), which changes nothing.
var appliers = map[entry.CommandType]applier{
	entry.CmdAcquire:      applierOf(applyAcquire),
	entry.CmdRelease:      applierOf(applyRelease),
	entry.CmdExpire:       applierOf(applyExpire),
	entry.CmdPut:          applierOf(applyPut),
	entry.CmdSetMember:    applierOf(applySetMember),
	entry.CmdRemoveMember: applierOf(applyRemoveMember),
	entry.CmdBumpEpoch:    applierOf(applyBumpEpoch),
	entry.CmdSetClusterID: applierOf(applySetClusterID),
	entry.CmdDeleteKey:    applierOf(applyDeleteKey),
	entry.CmdEndDelay:     applierOf(applyEndDelay),
	entry.CmdSemAcquire:   applierOf(applySemAcquire),
	entry.CmdSemRelease:   applierOf(applySemRelease),
	entry.CmdSemExpire:    applierOf(applySemExpire),
	entry.CmdSetValue:     applierOf(applySetValue),

	entry.CmdSetGrantHistory: applierOf(applySetGrantHistory),
	entry.CmdSessionCreate:   applierOf(applySessionCreate),
	entry.CmdSessionEnd:      applierOf(applySessionEnd),
	entry.CmdMultiAcquire:    applierOf(applyMultiAcquire),
	entry.CmdMultiRelease:    applierOf(applyMultiRelease),
	entry.CmdRevoke:          applierOf(applyRevoke),
	entry.CmdEnqueue:         applierOf(applyEnqueue),
	entry.CmdDequeue:         applierOf(applyDequeue),
}

type applier func(s *state, cmd entry.Command, index uint64) any

// applierOf adapts an apply function of one command type to the table.
func applierOf[C entry.Command](apply func(*state, C, uint64) any) applier {
	return func(s *state, cmd entry.Command, index uint64) any { return apply(s, cmd.(C), index) }
}

// applyCommand carries out a decoded command. Decode only returns commands
// of the table, and TestEveryCommandHasAnApplier keeps appliers complete.
func applyCommand(s *state, cmd entry.Command, index uint64) any {
	return appliers[cmd.Type()](s, cmd, index)
}

func applyAcquire(s *state, c *entry.Acquire, index uint64) any {
	if err := checkMode(c); err != nil {
		return err
	}
	if c.RequestID != "" {
		// Keyed by principal too: another principal replaying this request
		// id is a new request, refused as anyone's while the lock is held.
		if token, ok := s.requests.Token(locktable.RequestKey(c.Lock, c.Holder, c.RequestID, c.Principal)); ok {
			if cur, held := s.lockGrant(c.Lock, token); held {
				return &AcquireResult{Grant: s.lockOf(cur), Existing: true}
			}
			// The request was granted once and that grant has ended: never
			// mint a second token for the same request.
			return fmt.Errorf("%w: the grant for request %q (token %d) has already ended", refusal.ErrLeaseLost, c.RequestID, token)
		}
	}
	if err := s.underSession(c.Session, c.SessionLease); err != nil {
		return err
	}
	if err := s.heldRefusal(c); err != nil {
		return err
	}
	if d, delayed := s.delays[c.Lock]; delayed {
		return &refusal.DelayError{Lock: c.Lock, Since: d.Since, Millis: d.Millis}
	}
	return s.grant(c, index)
}

func (s *state) grant(c *entry.Acquire, index uint64) any {
	ttl, delay := c.TTLMillis, c.LockDelayMillis
	if c.Session != 0 {
		// The session's: the grant lives as long as it does.
		ttl, delay = s.sessionTerms(c.Session, delay)
	}
	if c.Lock == "" || ttl <= 0 {
		// The API never proposes these; a lock without a name or TTL could
		// not be written to a snapshot and read back (Image.check).
		return fmt.Errorf("%w: acquire of lock %q with ttl %d ms", entry.ErrMalformedCommand, c.Lock, c.TTLMillis)
	}
	token, err := s.mint(index)
	if err != nil {
		return err
	}
	e := locktable.NewEntry(&entry.Lock{
		Name:            c.Lock,
		Holder:          c.Holder,
		Token:           token,
		Lease:           c.Lease,
		TTLMillis:       ttl,
		RequestID:       c.RequestID,
		GrantedAtMillis: c.NowMillis,
		Principal:       c.Principal,
		LockDelayMillis: max(delay, 0),
		Value:           c.Value,
		Session:         c.Session,
	})
	shared := c.Mode == entry.ModeShared
	if shared {
		s.shared.Add(e)
	} else {
		s.locks.Add(e)
	}
	if c.Session != 0 {
		s.sessions.Attach(c.Session, sessions.Grant{Kind: sessions.Lock, Name: e.Name(), Token: token})
	}
	if s.history != nil {
		s.history.Granted(grants.Grant{Token: token, Granted: index, Name: e.Name(), Holder: e.Holder(), Shared: shared})
	}
	if c.RequestID != "" {
		s.requests.Remember(e.RequestKey(), token)
	}
	s.waiterGranted(KindLock, c.Lock, c.Holder, c.RequestID, c.Principal, token)
	return &AcquireResult{Grant: s.lockOf(e)}
}

// mint returns the token of a grant by the entry at index, now the last
// token, or why there is none.
func (s *state) mint(index uint64) (uint64, error) {
	if index > entry.MaxIndex || s.epoch >= entry.MaxEpoch {
		return 0, refusal.ErrTokenSpaceExhausted
	}
	token := entry.MakeToken(s.epoch, index)
	if token <= s.lastToken {
		// Cannot happen while log indexes increase; refuse rather than
		// issue a token that does not move forward.
		return 0, fmt.Errorf("%w: token %d would not exceed %d", refusal.ErrTokenSpaceExhausted, token, s.lastToken)
	}
	s.lastToken = token
	return token, nil
}

func applyRelease(s *state, c *entry.Release, index uint64) any {
	if g, ok := s.shared.Grant(c.Lock, c.Token); ok {
		if !secrets.Equal(g.Secret(), c.Lease) {
			return refusal.LeaseRefused(c.Lock, c.Token, c.Token, c.Lease)
		}
		if err := s.multiOf(g); err != nil {
			return err
		}
		return s.free(g, c.Next, index, grants.Released)
	}
	cur, err := s.current(c.Lock, c.Token, c.Lease)
	if err != nil {
		return err
	}
	if err := s.multiOf(cur); err != nil {
		return err
	}
	return s.free(cur, c.Next, index, grants.Released)
}

// current returns the held grant of lock with token and secret, or a
// refusal.LeaseError that says why there is none.
func (s *state) current(lock string, token uint64, secret string) (*locktable.Entry, error) {
	cur, held := s.locks.Get(lock)
	if !held {
		return nil, refusal.LeaseRefused(lock, 0, token, secret)
	}
	if cur.Token() != token || !secrets.Equal(cur.Secret(), secret) {
		return nil, refusal.LeaseRefused(lock, cur.Token(), token, secret)
	}
	return cur, nil
}

func applyExpire(s *state, c *entry.Expire, index uint64) any {
	cur, held := s.lockGrant(c.Lock, c.Token)
	if !held {
		return fmt.Errorf("%w: lock %q token %d already ended", refusal.ErrLeaseLost, c.Lock, c.Token)
	}
	if err := s.multiOf(cur); err != nil {
		return err
	}
	if cur.LockDelayMillis() > 0 {
		// The grant asked for a lock-delay: nobody gets the lock until an
		// EndDelay, not even a waiter offered in this entry (the leader
		// offers none; a handoff here would be refused by the delay). A
		// shared grant's delays the lock for every mode.
		s.startDelay(c.Lock, index, cur.LockDelayMillis())
	}
	return s.free(cur, c.Next, index, grants.Expired)
}

// free ends cur at index, the way says how (released or expired), and
// grants the lock to next in the same entry, if any (a hand-off).
func (s *state) free(cur *locktable.Entry, next *entry.Acquire, index uint64, way grants.Way) *ReleaseResult {
	res := &ReleaseResult{Freed: s.lockOf(cur)}
	name := cur.Name()
	s.removeLock(cur)
	if id := cur.Session(); id != 0 {
		s.sessions.Detach(id, cur.Token())
	}
	if d, delayed := s.delays[name]; delayed && d.Since == index {
		res.Delay = &d
	}
	if next != nil {
		next.Lock = name
		switch r := applyAcquire(s, next, index).(type) {
		case *AcquireResult:
			res.Next = &r.Grant
			way = handedOff(way)
		case error:
			res.NextErr = r
		}
	}
	if s.history != nil {
		s.history.Ended(grants.OfLock, name, cur.Token(), index, way)
	}
	return res
}

func applyPut(s *state, c *entry.Put, _ uint64) any {
	if c.Key == "" {
		return fmt.Errorf("%w: put without a key", entry.ErrMalformedCommand)
	}
	if c.Token == 0 {
		return fmt.Errorf("%w: token 0 is never issued", refusal.ErrStaleToken)
	}
	if entry.TokenEpoch(c.Token) < s.floor {
		// A grant of an epoch before the last restore or recovery: void,
		// even above a mark that the restore took back (see DESIGN.md).
		return &refusal.StaleError{Key: c.Key, Token: c.Token, LastToken: s.keys.Mark(c.Key), Floor: s.floor}
	}
	if c.IssuedOnly() && c.Token > s.lastToken {
		// A mark above every token issued would refuse every real holder
		// until tokens caught up with it, for good at 2^64-1.
		return &refusal.UnissuedError{Key: c.Key, Token: c.Token}
	}
	if c.Lock != "" {
		cur, held := s.locks.Get(c.Lock)
		if !held || cur.Token() != c.Token {
			// Only the exclusive grant writes under the lock: a shared
			// grant's readers may be many at once.
			_, shared := s.shared.Grant(c.Lock, c.Token)
			return &refusal.NotHolderError{Lock: c.Lock, Token: c.Token, Shared: shared}
		}
	}
	if k, ok := s.keys.Get(c.Key); ok && c.Token <= k.Token {
		return &refusal.StaleError{Key: c.Key, Token: c.Token, LastToken: k.Token}
	}
	s.keys.Set(&entry.FencedKey{Key: c.Key, Value: c.Value, Token: c.Token, Principal: c.Principal})
	return &PutResult{Key: c.Key, Token: c.Token}
}

// apply removes the key and its mark; a key that does not exist is
// refusal.ErrNoSuchKey.
func applyDeleteKey(s *state, c *entry.DeleteKey, _ uint64) any {
	old, ok := s.keys.Delete(c.Key)
	if !ok {
		return fmt.Errorf("%w: %q", refusal.ErrNoSuchKey, c.Key)
	}
	return &DeleteKeyResult{Key: old.Key, LastToken: old.Token}
}

func applySetMember(s *state, c *entry.SetMember, _ uint64) any {
	s.members[c.ID] = c.Member
	return nil
}

func applyRemoveMember(s *state, c *entry.RemoveMember, _ uint64) any {
	delete(s.members, c.ID)
	return nil
}

// apply returns the new epoch.
func applyBumpEpoch(s *state, c *entry.BumpEpoch, _ uint64) any {
	s.epoch++
	return s.epoch
}

// apply returns the cluster's id, which only the first SetClusterID sets.
func applySetClusterID(s *state, c *entry.SetClusterID, _ uint64) any {
	if s.clusterID == "" {
		s.clusterID = c.ID
	}
	return s.clusterID
}
