// Package recovery rewrites a stopped node's data dir after its cluster lost
// its quorum for good (fencer recover): Raft's forced recovery to an explicit
// membership, with the token epoch moved past anything the lost members may
// have granted.
package recovery

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"

	"github.com/fencer-io/fencer/cluster"
	"github.com/fencer-io/fencer/cluster/datadir"
	"github.com/fencer-io/fencer/cluster/logstore"
	"github.com/fencer-io/fencer/fsm"
	"github.com/fencer-io/fencer/fsm/entry"
	"github.com/fencer-io/fencer/fsm/snapshot"
)

// Options describe a forced recovery of a cluster that lost its quorum for
// good.
type Options struct {
	DataDir string
	ID      string
	// Members is the new, explicit membership: the survivors.
	Members []cluster.Peer
	// EpochBump is how far to move the token epoch (default 1). The lost
	// members may have committed entries, grants among them, that no
	// survivor has; bumping the epoch puts every later token above them.
	EpochBump uint64
	Logger    *slog.Logger
}

// Recover rewrites a stopped node's data dir so that it starts as a member
// of the given membership (hashicorp/raft's RecoverCluster), with the token
// epoch bumped. Run it on every survivor, with the same member list, while
// the nodes are stopped; then start them normally.
//
// It is long because a forced recovery is one ordered procedure that an
// operator audits step by step.
func Recover(o Options) (snapshot.Header, error) {
	if o.EpochBump == 0 {
		o.EpochBump = 1
	}
	if _, err := snapshot.RecoveryEpoch(0, o.EpochBump); err != nil {
		// Refused before the data dir is opened; the bump from the
		// survivor's epoch is checked again when it is known.
		return snapshot.Header{}, fmt.Errorf("%w: %v", cluster.ErrInvalidEpoch, err)
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if len(o.Members) == 0 {
		return snapshot.Header{}, errors.New("recover needs the explicit list of surviving members")
	}
	found := false
	for _, m := range o.Members {
		found = found || m.ID == o.ID
	}
	if !found {
		return snapshot.Header{}, fmt.Errorf("the member list does not include this node %q", o.ID)
	}
	lock, err := datadir.TryLock(o.DataDir)
	if err != nil {
		return snapshot.Header{}, err
	}
	defer lock.Release()
	ident, err := datadir.LoadIdentity(o.DataDir, o.ID)
	if err != nil {
		return snapshot.Header{}, err
	}
	if err := datadir.MakePrivate(o.DataDir, o.Logger); err != nil {
		return snapshot.Header{}, err
	}
	logger := hclog.New(&hclog.LoggerOptions{Name: "raft-recover", Level: hclog.Warn, Output: os.Stderr})
	store, _, err := logstore.OpenExisting(o.DataDir, ident, logger)
	if err != nil {
		return snapshot.Header{}, fmt.Errorf("open raft store: %w", err)
	}
	defer store.Close()
	snaps, err := datadir.OpenSnapshots(o.DataDir, logger)
	if err != nil {
		return snapshot.Header{}, err
	}
	has, err := raft.HasExistingState(store, store, snaps)
	if err != nil {
		return snapshot.Header{}, err
	}
	if !has {
		return snapshot.Header{}, fmt.Errorf("data dir %s has no Raft state to recover", o.DataDir)
	}
	var conf raft.Configuration
	for _, m := range o.Members {
		conf.Servers = append(conf.Servers, raft.Server{ID: raft.ServerID(m.ID), Address: raft.ServerAddress(m.RaftAddr), Suffrage: raft.Voter})
	}
	rc := raft.DefaultConfig()
	rc.LocalID = raft.ServerID(o.ID)
	rc.Logger = logger
	f := &recoveryFSM{FSM: fsm.New(o.Logger), bump: o.EpochBump, members: o.Members}
	_, trans := raft.NewInmemTransport("")
	if err := raft.RecoverCluster(rc, f, store, store, snaps, trans, conf); err != nil {
		return snapshot.Header{}, fmt.Errorf("recover: %w", err)
	}
	h := f.written
	o.Logger.Info("recovered data dir with a new membership", "node", o.ID, "members", len(o.Members), "epoch", h.Epoch, "last_token", h.LastToken, "applied_index", h.AppliedIndex)
	return h, nil
}

// recoveryFSM replays the survivor's log like the real FSM; when raft takes
// the recovery snapshot, it writes the replayed state with the epoch bumped,
// the member addresses replaced by the new membership, and every held lock
// and remembered request voided: the lost members may have expired and
// re-granted those locks, so a grant from before a forced recovery is not
// trusted after it. This is the one place where state changes outside the
// log, on purpose: the log that would carry the change has no quorum to
// commit it.
type recoveryFSM struct {
	*fsm.FSM
	bump    uint64
	members []cluster.Peer
	written snapshot.Header // of the snapshot written
}

func (r *recoveryFSM) Snapshot() (raft.FSMSnapshot, error) {
	img := r.FSM.Image()
	known := map[string]entry.Member{}
	for _, m := range img.Members {
		known[m.ID] = m
	}
	img.Members = nil
	for _, p := range r.members {
		m := known[p.ID]
		m.ID, m.RaftAddr, m.HTTPAddr = p.ID, p.RaftAddr, p.HTTPAddr
		img.Members = append(img.Members, m)
	}
	slices.SortFunc(img.Members, func(a, b entry.Member) int { return strings.Compare(a.ID, b.ID) })
	// The grant history ends the held grants as voided here. No voided
	// events: every member starts from a recovered state (boot), so none
	// would report them.
	img.Void(img, img.Header.AppliedIndex)
	img.Voided, img.Header.Voided, img.Header.VoidedPermits, img.Header.RestoredAt = nil, 0, 0, 0
	img.Locks, img.Requests, img.Delays, img.Permits = nil, nil, nil, nil
	// Sessions end with the grants they held.
	img.Sessions, img.EndedSessions = nil, nil
	img.Shared = nil
	// Durable waiters keep their places; the grants they got are void.
	img.Waited = nil
	epoch, err := snapshot.RecoveryEpoch(img.Header.Epoch, r.bump)
	if err != nil {
		// RecoverCluster stops here, before it writes anything.
		return nil, fmt.Errorf("%w: %v", cluster.ErrInvalidEpoch, err)
	}
	img.Header.Epoch = epoch
	// The lost members' grants are void: fenced writes with their tokens
	// are refused from now on, whatever the keys' marks.
	img.Header.EpochFloor = epoch
	img.Header.Locks, img.Header.Members, img.Header.Requests, img.Header.Delays, img.Header.Permits = 0, len(img.Members), 0, 0, 0
	img.Header.Sessions, img.Header.EndedSessions = 0, 0
	img.Header.SharedLocks, img.Header.Waited = 0, 0
	img.Header.MemberKeys = snapshot.MemberKeys(img.Members)
	r.written = img.Header
	return imageSnapshot{img}, nil
}

// imageSnapshot persists an image in fencer's snapshot format.
type imageSnapshot struct{ img *snapshot.Image }

func (s imageSnapshot) Persist(sink raft.SnapshotSink) error {
	if _, err := s.img.WriteTo(sink); err != nil {
		sink.Cancel()
		return fmt.Errorf("persist snapshot: %w", err)
	}
	return sink.Close()
}

func (imageSnapshot) Release() {}
