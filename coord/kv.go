package coord

import (
	"context"
	"fmt"

	"github.com/fencer-io/fencer/fsm"
	"github.com/fencer-io/fencer/fsm/entry"
	"github.com/fencer-io/fencer/fsm/refusal"
)

// PutRequest is a fenced write.
type PutRequest struct {
	Key   string
	Value []byte
	Token uint64
	// Lock, when set, also requires that Token is this lock's current grant.
	Lock string
	// Principal is the authenticated writer ("" without an ACL); the value
	// counts in its share of the store.
	Principal string
}

// Put stores a fenced value: the FSM refuses a token that is not above the
// key's high-water mark, or, when a lock is named, not its current grant.
// The leader refuses first, without an entry, a token above every token
// granted so far (the FSM's rule too, which members on older builds lack;
// fsm/DESIGN.md says why checking here keeps them in step) and a write
// beyond the store's limits, each only once a quorum round proved it still
// leads: a leader deposed while it slept has not applied what its
// successor granted, and "never issued" from it was false.
func (s *Service) Put(ctx context.Context, req PutRequest) (uint64, error) {
	if err := s.awaitLeader(ctx); err != nil {
		return 0, err
	}
	if last := s.fsm.LastToken(); req.Token > last {
		return 0, s.refuse(&refusal.UnissuedError{Key: req.Key, Token: req.Token})
	}
	if s.raft.EntryFormat() < entry.LogFormatPrincipal {
		req.Principal = "" // the entry carries none
	}
	if err := s.checkKVLimits(req); err != nil {
		return 0, s.refuse(err)
	}
	res, err := s.raft.Apply(&entry.Put{Key: req.Key, Value: req.Value, Token: req.Token, Lock: req.Lock, Principal: req.Principal})
	if err != nil {
		return 0, err
	}
	return res.(*fsm.PutResult).Token, nil
}

// checkKVLimits refuses a put that would take the store, or its writer's
// share, past a limit. An overwrite counts the difference, and a write that
// grows nothing is never refused, so lowered limits still let keys shrink.
// Puts in flight together may overshoot by their number, as acquires do.
func (s *Service) checkKVLimits(req PutRequest) error {
	c := s.cfg
	u := s.fsm.KVUsage(req.Key, req.Principal)
	size := int64(len(req.Value))
	if !u.Exists && u.Keys >= c.MaxKeys {
		return fmt.Errorf("%w: %d keys stored (limit %d); delete keys or raise --max-keys", ErrKVFull, u.Keys, c.MaxKeys)
	}
	if grow := size - u.OldBytes; grow > 0 && u.Bytes+grow > c.MaxKVBytes {
		return fmt.Errorf("%w: %d value bytes stored, %d more would pass the limit of %d (--max-kv-bytes)", ErrKVFull, u.Bytes, grow, c.MaxKVBytes)
	}
	if req.Principal == "" {
		return nil
	}
	grow := size
	if u.Exists && u.OldPrincipal == req.Principal {
		grow -= u.OldBytes
	}
	if grow > 0 && u.Principal+grow > c.MaxKVBytesPerPrincipal {
		return fmt.Errorf("%w: %q last wrote %d value bytes, %d more would pass its limit of %d (--max-kv-bytes-per-principal)",
			ErrKVFull, req.Principal, u.Principal, grow, c.MaxKVBytesPerPrincipal)
	}
	return nil
}

// DeleteKey removes a fenced key and its mark through the log, so that the
// next write to it is accepted whatever its token. It needs every member to
// read entry.LogFormatPrincipal (entry.ErrFormatTooOld otherwise); a key that
// is not stored is refusal.ErrNoSuchKey.
func (s *Service) DeleteKey(ctx context.Context, key string) (fsm.DeleteKeyResult, error) {
	if err := s.awaitLeader(ctx); err != nil {
		return fsm.DeleteKeyResult{}, err
	}
	res, err := s.raft.Apply(&entry.DeleteKey{Key: key})
	if err != nil {
		return fsm.DeleteKeyResult{}, err
	}
	return *res.(*fsm.DeleteKeyResult), nil
}

// Get reads a fenced key, and the log index it was read at; linearizable
// unless stale.
func (s *Service) Get(ctx context.Context, key string, stale bool) (entry.FencedKey, bool, uint64, error) {
	if !stale {
		if err := s.linearizable(ctx); err != nil {
			return entry.FencedKey{}, false, 0, err
		}
	}
	k, ok, index := s.fsm.KeyAt(key)
	return k, ok, index, nil
}
