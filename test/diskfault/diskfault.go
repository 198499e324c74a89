// Package diskfault is a Raft log store that tests can make stall or fail:
// it wraps a node's real log store, bolt or wal
// (cluster.Config.WrapLogStore), and passes every call through until a test
// switches it. Only test code and the
// chaos suite's build of fencer (build tag diskfault) use it; no flag of
// fencer reaches it.
package diskfault

import (
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/hashicorp/raft"
)

// Store wraps a log store. Reads always pass; writes (StoreLog, StoreLogs,
// DeleteRange) pass while it is healthy, wait while it stalls, and fail
// while it fails.
type Store struct {
	raft.LogStore

	mu      sync.Mutex
	fail    error         // non-nil: writes fail with it
	stalled bool          // writes wait for release
	release chan struct{} // closed when a stall ends
	held    atomic.Int32  // writes waiting now
}

// Wrap returns a healthy Store over s.
func Wrap(s raft.LogStore) *Store {
	return &Store{LogStore: s, release: make(chan struct{})}
}

// Stall makes every write from now on wait, as on a disk that stopped
// answering, until Heal or Fail.
func (s *Store) Stall() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.stalled {
		s.stalled, s.release = true, make(chan struct{})
	}
}

// Fail makes every write fail with err, the writes held by a stall too.
func (s *Store) Fail(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.fail = err
	s.endStall()
}

// FailNoSpace makes writes fail as on a full disk.
func (s *Store) FailNoSpace() { s.Fail(syscall.ENOSPC) }

// Heal lets writes through again; held writes go on and complete.
func (s *Store) Heal() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.fail = nil
	s.endStall()
}

func (s *Store) endStall() {
	if s.stalled {
		s.stalled = false
		close(s.release)
	}
}

// Held returns how many writes are waiting on a stall now.
func (s *Store) Held() int { return int(s.held.Load()) }

// gate waits out a stall and returns the failure writes must return, if
// any.
func (s *Store) gate() error {
	for {
		s.mu.Lock()
		fail, stalled, release := s.fail, s.stalled, s.release
		s.mu.Unlock()
		if fail != nil {
			return fmt.Errorf("write to the log store: %w", fail)
		}
		if !stalled {
			return nil
		}
		s.held.Add(1)
		<-release
		s.held.Add(-1)
	}
}

func (s *Store) StoreLog(l *raft.Log) error {
	if err := s.gate(); err != nil {
		return err
	}
	return s.LogStore.StoreLog(l)
}

func (s *Store) StoreLogs(logs []*raft.Log) error {
	if err := s.gate(); err != nil {
		return err
	}
	return s.LogStore.StoreLogs(logs)
}

func (s *Store) DeleteRange(lo, hi uint64) error {
	if err := s.gate(); err != nil {
		return err
	}
	return s.LogStore.DeleteRange(lo, hi)
}

// IsMonotonic passes on whether the store below refuses gaps in the log,
// as the node's own wrapper does (cluster/disk.go).
func (s *Store) IsMonotonic() bool {
	m, ok := s.LogStore.(raft.MonotonicLogStore)
	return ok && m.IsMonotonic()
}

// Disks keeps the Store of each node of a test cluster, by node id; a
// restarted node's new Store replaces its old one.
type Disks struct {
	mu     sync.Mutex
	stores map[string]*Store
}

// NewDisks returns an empty set.
func NewDisks() *Disks { return &Disks{stores: map[string]*Store{}} }

// Wrap returns the cluster.Config.WrapLogStore of node id.
func (d *Disks) Wrap(id string) func(raft.LogStore) raft.LogStore {
	return func(s raft.LogStore) raft.LogStore {
		st := Wrap(s)
		d.mu.Lock()
		d.stores[id] = st
		d.mu.Unlock()
		return st
	}
}

// Of returns node id's current Store (nil before it opened one).
func (d *Disks) Of(id string) *Store {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.stores[id]
}

// HealAll heals every Store, so that nodes held by a stall can stop.
func (d *Disks) HealAll() {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, s := range d.stores {
		s.Heal()
	}
}

// ControlEnv names the file through which a fencer built with the diskfault
// tag lets a harness switch its log store: "stall", "enospc", or anything
// else (or no file) for healthy. The chaos suite writes it.
const ControlEnv = "FENCER_DISK_FAULT_FILE"

// Controlled returns a cluster.Config.WrapLogStore whose Store follows the
// control file at path, read every pollEvery.
func Controlled(path string) func(raft.LogStore) raft.LogStore {
	return func(s raft.LogStore) raft.LogStore {
		st := Wrap(s)
		go st.follow(path)
		return st
	}
}

const pollEvery = 20 * time.Millisecond

// follow applies the control file's mode whenever it changes, for the life
// of the process, and acknowledges each in the file path+".ack", so that a
// harness knows the fault is in place (and that this build has the tag).
func (s *Store) follow(path string) {
	last := "\x00" // apply and acknowledge the first reading too
	for {
		data, _ := os.ReadFile(path)
		if mode := strings.TrimSpace(string(data)); mode != last {
			switch mode {
			case "stall":
				s.Stall()
			case "enospc":
				s.FailNoSpace()
			default:
				s.Heal()
			}
			last = mode
			_ = os.WriteFile(path+".ack", []byte(mode), 0o644)
		}
		time.Sleep(pollEvery) // polling a file: there is no state to wait for
	}
}
