package recovery

import (
	"bytes"
	"errors"
	"math"
	"testing"

	"github.com/hashicorp/raft"

	"github.com/fencer-io/fencer/cluster"
	"github.com/fencer-io/fencer/fsm"
	"github.com/fencer-io/fencer/fsm/entry"
	"github.com/fencer-io/fencer/fsm/snapshot"
)

type sink struct{ bytes.Buffer }

func (*sink) ID() string    { return "test" }
func (*sink) Cancel() error { return nil }
func (*sink) Close() error  { return nil }

// The recovery snapshot is the replayed state with the epoch bumped, the new
// membership (keeping what the survivors recorded), no held locks and no
// remembered requests; fenced keys and the last token stay.
func TestRecoverySnapshot(t *testing.T) {
	f := fsm.New(nil)
	apply := func(i uint64, cmd entry.Command) {
		t.Helper()
		if err, ok := f.ApplyCommand(cmd, i).(error); ok {
			t.Fatal(err)
		}
	}
	apply(1, &entry.SetMember{Member: entry.Member{ID: "n2", RaftAddr: "old2", HTTPAddr: "oldh2", Incarnation: "i2", LogFormat: 1}})
	apply(2, &entry.SetMember{Member: entry.Member{ID: "n1", RaftAddr: "r1", HTTPAddr: "h1", Incarnation: "i1", LogFormat: 1}})
	apply(3, &entry.SetMember{Member: entry.Member{ID: "n3", RaftAddr: "r3", HTTPAddr: "h3"}})
	apply(4, &entry.Acquire{Lock: "l", Holder: "h", Lease: "s", TTLMillis: 1000, RequestID: "r"})
	apply(5, &entry.Put{Key: "k", Value: []byte("v"), Token: 4})

	r := &recoveryFSM{FSM: f, bump: 2, members: []cluster.Peer{{ID: "n2", RaftAddr: "r2", HTTPAddr: "h2"}, {ID: "n1", RaftAddr: "r1", HTTPAddr: "h1"}}}
	snap, err := r.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	var s sink
	if err := snap.Persist(&s); err != nil {
		t.Fatal(err)
	}
	img, err := snapshot.ReadImage(&s.Buffer)
	if err != nil {
		t.Fatal(err)
	}
	h := img.Header
	if h.Epoch != 2 || h.LastToken != 4 || h.AppliedIndex != 5 || len(img.Locks) != 0 || len(img.Requests) != 0 || len(img.Keys) != 1 {
		t.Fatalf("header %+v, %d locks, %d requests, %d keys", h, len(img.Locks), len(img.Requests), len(img.Keys))
	}
	want := []entry.Member{
		{ID: "n1", RaftAddr: "r1", HTTPAddr: "h1", Incarnation: "i1", LogFormat: 1},
		{ID: "n2", RaftAddr: "r2", HTTPAddr: "h2", Incarnation: "i2", LogFormat: 1},
	}
	if len(img.Members) != 2 || img.Members[0] != want[0] || img.Members[1] != want[1] {
		t.Fatalf("members %+v, want %+v", img.Members, want)
	}
	if r.written != h {
		t.Fatalf("reported header %+v, wrote %+v", r.written, h)
	}
	// Restored, it is a state like any other.
	g := fsm.New(nil)
	var again sink
	snap.Persist(&again)
	if err := g.Restore(nopCloser{&again.Buffer}); err != nil || g.Epoch() != 2 {
		t.Fatalf("restore: %v, epoch %d", err, g.Epoch())
	}
}

// A bump past entry.LastEpoch is refused before anything is written: the
// recovered cluster would issue no token, ever.
func TestRecoveryRefusesEpochPastTheLast(t *testing.T) {
	f := fsm.New(nil)
	members := []cluster.Peer{{ID: "n1", RaftAddr: "r1", HTTPAddr: "h1"}}
	for _, bump := range []uint64{entry.LastEpoch + 1, math.MaxUint64} {
		r := &recoveryFSM{FSM: f, bump: bump, members: members}
		if _, err := r.Snapshot(); !errors.Is(err, cluster.ErrInvalidEpoch) {
			t.Fatalf("bump %d: %v, want invalid epoch", bump, err)
		}
		if _, err := Recover(Options{DataDir: t.TempDir(), ID: "n1", Members: members, EpochBump: bump}); !errors.Is(err, cluster.ErrInvalidEpoch) {
			t.Fatalf("Recover with bump %d: %v, want invalid epoch", bump, err)
		}
	}
	r := &recoveryFSM{FSM: f, bump: entry.LastEpoch, members: members}
	if _, err := r.Snapshot(); err != nil {
		t.Fatalf("a bump to the last epoch: %v", err)
	}
}

type nopCloser struct{ *bytes.Buffer }

func (nopCloser) Close() error { return nil }

var _ raft.SnapshotSink = (*sink)(nil)

// A forced recovery keeps the durable waiters (issue 28) in their order,
// and voids the grant a durable waiter got with every other: its wait
// index goes with it.
func TestRecoveryKeepsDurableWaiters(t *testing.T) {
	f := fsm.New(nil)
	apply := func(i uint64, cmd entry.Command) {
		t.Helper()
		if err, ok := f.ApplyCommand(cmd, i).(error); ok {
			t.Fatal(err)
		}
	}
	waiter := func(holder string) *entry.Acquire {
		return &entry.Acquire{Lock: "l", Holder: holder, Lease: "s-" + holder, TTLMillis: 1000, RequestID: "r-" + holder}
	}
	apply(1, &entry.SetMember{Member: entry.Member{ID: "n1", RaftAddr: "r1", HTTPAddr: "h1"}})
	apply(2, &entry.Acquire{Lock: "l", Holder: "h", Lease: "s", TTLMillis: 1000})
	for i, w := range []string{"w1", "w2", "w3"} {
		apply(uint64(3+i), &entry.Enqueue{Acquire: waiter(w), WaitMillis: 1000})
	}
	apply(6, &entry.Release{Lock: "l", Token: 2, Lease: "s", Next: waiter("w1")})
	r := &recoveryFSM{FSM: f, bump: 1, members: []cluster.Peer{{ID: "n1", RaftAddr: "r1", HTTPAddr: "h1"}}}
	snap, err := r.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	var s sink
	if err := snap.Persist(&s); err != nil {
		t.Fatal(err)
	}
	g := fsm.New(nil)
	if err := g.Restore(nopCloser{&s.Buffer}); err != nil {
		t.Fatal(err)
	}
	if w := g.DurableWaiters(); len(w) != 2 || w[0].Holder() != "w2" || w[1].Holder() != "w3" {
		t.Fatalf("recovered waiters %+v", w)
	}
	if _, held := g.Lock("l"); held {
		t.Fatal("the durable waiter's grant survived the recovery")
	}
}
