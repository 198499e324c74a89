package coord

import (
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/fencer-io/fencer/cluster"
	"github.com/fencer-io/fencer/coord/internal/fakeclock"
	"github.com/fencer-io/fencer/fsm"
	"github.com/fencer-io/fencer/fsm/entry"
)

// fakeRaft is a Raft node in memory: each command is encoded as the log
// would carry it and applied, in order, to a real fsm.FSM at the next index,
// as a leader would commit it. Leadership changes when the test says so.
type fakeRaft struct {
	fsm *fsm.FSM

	mu      sync.Mutex
	index   uint64
	entries []entry.Command // applied, in log order (entries[i] is at index i+1)
	leader  bool
	changed chan struct{}
	// hook, when set, decides whether a command reaches the log and what
	// Apply returns instead of its result (err nil: the result).
	hook func(cmd entry.Command) (commit bool, err error)
	// barrier, when set, holds every Barrier until it is closed.
	barrier chan struct{}
	// format is the log format entries are written in, as the members'
	// records would decide it.
	format int
}

func newFakeRaft() *fakeRaft {
	return &fakeRaft{fsm: fsm.New(nil), leader: true, changed: make(chan struct{}), format: entry.LogFormat}
}

func (f *fakeRaft) Apply(cmd entry.Command) (any, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.leader {
		return nil, cluster.ErrNotLeader
	}
	commit, err := true, error(nil)
	if f.hook != nil {
		commit, err = f.hook(cmd)
	}
	var res any
	if commit {
		data, encErr := entry.EncodeFormat(cmd, f.format)
		if encErr != nil {
			return nil, encErr
		}
		f.index++
		f.entries = append(f.entries, cmd)
		res = f.fsm.Apply(&raft.Log{Index: f.index, Term: 1, Type: raft.LogCommand, Data: data})
	}
	if err != nil {
		return nil, err
	}
	if e, ok := res.(error); ok {
		return nil, e
	}
	return res, nil
}

func (f *fakeRaft) VerifyLeader() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.leader {
		return cluster.ErrNotLeader
	}
	return nil
}

func (f *fakeRaft) Barrier() error {
	f.mu.Lock()
	gate := f.barrier
	f.mu.Unlock()
	if gate != nil {
		<-gate
	}
	return f.VerifyLeader()
}

func (f *fakeRaft) EntryFormat() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.format
}

func (f *fakeRaft) Ready() (int, error) { return f.EntryFormat(), nil }

func (f *fakeRaft) Leadership() (bool, <-chan struct{}) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.leader, f.changed
}

// setLeader ends the current view of leadership and begins one.
func (f *fakeRaft) setLeader(leader bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	close(f.changed)
	f.leader, f.changed = leader, make(chan struct{})
}

// log returns the commands applied so far.
func (f *fakeRaft) log() []entry.Command {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]entry.Command(nil), f.entries...)
}

// newTestService runs a Service over a fake Raft that leads, with a fake
// clock, and waits until it serves.
func newTestService(t *testing.T, cfg Config) (*Service, *fakeRaft, *fakeclock.Clock) {
	t.Helper()
	return newTestServiceOver(t, newFakeRaft(), cfg)
}

// newTestServiceOver is newTestService over a given fake Raft.
func newTestServiceOver(t *testing.T, f *fakeRaft, cfg Config) (*Service, *fakeRaft, *fakeclock.Clock) {
	t.Helper()
	clock := fakeclock.New()
	cfg.Clock = clock
	s := New(f, f.fsm, cfg)
	t.Cleanup(s.Close)
	waitReady(t, s)
	return s, f, clock
}

// poll waits for cond with a deadline.
func poll(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// waitReady waits until the service has promoted itself in the current view.
func waitReady(t *testing.T, s *Service) {
	t.Helper()
	poll(t, "the service to serve", s.leader.Ready)
}
