package acl

import (
	"context"
	"crypto/sha256"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"sync/atomic"
	"syscall"
)

// Store holds the ACL in force and swaps in a new one atomically on Reload:
// a request sees either the old file or the new one, never a mix.
type Store struct {
	path string
	cur  atomic.Pointer[ACL]
	// cluster is the SHA-256 of the cluster secret; nil without one.
	cluster *[sha256.Size]byte
	// reloads tells the requests that outlive a reload (session.go).
	reloads reloads
	// members checks members' own keys (UseMembers); nil until set.
	members atomic.Pointer[memberView]
	// replays refuses a member's signed change seen before (replay.go).
	replays replays
}

// Open loads the ACL file at path into a Store.
func Open(path string, opts ...StoreOption) (*Store, error) {
	s := &Store{path: path}
	for _, o := range opts {
		o(s)
	}
	a, err := s.load()
	if err != nil {
		return nil, err
	}
	s.cur.Store(a)
	return s, nil
}

// load reads the file, refusing one that grants the cluster secret.
func (s *Store) load() (*ACL, error) {
	a, err := Load(s.path)
	if err != nil {
		return nil, err
	}
	if err := s.checkReserved(a); err != nil {
		return nil, fmt.Errorf("acl file %s: %w", s.path, err)
	}
	return a, nil
}

// NewStore holds a fixed ACL; Reload on it is a no-op.
func NewStore(a *ACL) *Store {
	s := &Store{}
	s.cur.Store(a)
	return s
}

// ACL returns the ACL in force.
func (s *Store) ACL() *ACL { return s.cur.Load() }

// Reload re-reads the file. On any error the ACL in force stays, so a typo
// in an edit never locks everybody out or lets everybody in.
func (s *Store) Reload() error {
	if s.path == "" {
		return nil
	}
	a, err := s.load()
	if err != nil {
		return err
	}
	s.cur.Store(a)
	s.reloads.signal()
	return nil
}

// ReloadOnSignal reloads on each SIGHUP until ctx ends, logging the outcome.
func (s *Store) ReloadOnSignal(ctx context.Context, log *slog.Logger) {
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, syscall.SIGHUP)
	go func() {
		defer signal.Stop(ch)
		for {
			select {
			case <-ctx.Done():
				return
			case <-ch:
				if err := s.Reload(); err != nil {
					log.Error("acl reload failed; keeping the previous ACL", "file", s.path, "err", err)
				} else {
					log.Info("acl reloaded", "file", s.path, "tokens", len(s.ACL().tokens))
				}
			}
		}
	}()
}
