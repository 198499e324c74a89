package coord

import (
	"context"

	"github.com/fencer-io/fencer/fsm"
)

// Put stores a fenced value: the FSM refuses a token that is not above the
// key's high-water mark, or, when lock is named, not its current grant.
func (s *Service) Put(ctx context.Context, key string, value []byte, token uint64, lock string) (uint64, error) {
	if err := s.awaitLeader(ctx); err != nil {
		return 0, err
	}
	res, err := s.raft.Apply(&fsm.Put{Key: key, Value: value, Token: token, Lock: lock})
	if err != nil {
		return 0, err
	}
	return res.(*fsm.PutResult).Token, nil
}

// Get reads a fenced key; linearizable unless stale.
func (s *Service) Get(ctx context.Context, key string, stale bool) (fsm.FencedKey, bool, error) {
	if !stale {
		if err := s.linearizable(ctx); err != nil {
			return fsm.FencedKey{}, false, err
		}
	}
	k, ok := s.fsm.Key(key)
	return k, ok, nil
}
