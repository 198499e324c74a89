package cluster

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"time"

	"github.com/hashicorp/raft"

	"github.com/fencer-io/fencer/cluster/internal/restore"
	"github.com/fencer-io/fencer/fsm/snapshot"
)

// Backup writes a consistent copy of the replicated state, read on a leader
// that has confirmed its leadership, in fencer's snapshot format.
func (n *Node) Backup(ctx context.Context, w io.Writer) (snapshot.Header, error) {
	if err := n.linearizable(ctx); err != nil {
		return snapshot.Header{}, err
	}
	// A View streams the state out record by record, without a copy of it.
	v := n.fsm.View()
	_, err := v.WriteTo(w)
	return v.Header, err
}

// RestoreOptions tune a restore.
type RestoreOptions struct {
	// MinEpoch raises the new epoch to at least this value. Needed only
	// when the cluster the backup came from had itself been restored or
	// recovered after the backup was taken (its epoch moved past the
	// backup's).
	MinEpoch uint64
}

// Restore replaces the cluster's state with a backup, so that every token
// issued afterwards is larger than every token the old cluster ever issued,
// including those issued after the backup was taken, which the backup cannot
// know: restore.Plan states the rule and builds the state. If the old
// cluster's epoch had moved past the backup's (it was itself restored or
// recovered after the backup), pass MinEpoch above it.
func (n *Node) Restore(ctx context.Context, r io.Reader, opts RestoreOptions) (snapshot.Header, error) {
	if err := n.awaitLeader(ctx); err != nil {
		return snapshot.Header{}, err
	}
	backup, err := snapshot.ReadImage(r)
	if err != nil {
		return snapshot.Header{}, fmt.Errorf("%w: %v", ErrInvalidSnapshot, err)
	}
	n.configMu.Lock()
	defer n.configMu.Unlock()
	// Raft installs the snapshot at max(its index, last index)+1; say so in
	// the header so that the applied index reads right.
	index := max(n.raft.LastIndex(), backup.Header.AppliedIndex) + 1
	img, err := restore.Plan(backup, n.fsm.Image(), opts.MinEpoch, index, n.raft.CurrentTerm())
	if err != nil {
		return snapshot.Header{}, err
	}

	var buf bytes.Buffer
	if _, err := img.WriteTo(&buf); err != nil {
		return snapshot.Header{}, err
	}
	meta := &raft.SnapshotMeta{Version: raft.SnapshotVersionMax, Index: index - 1, Term: img.Header.Term, Size: int64(buf.Len())}
	start := time.Now()
	if err := n.raft.Restore(meta, &buf, 2*time.Minute); err != nil {
		return snapshot.Header{}, translate(err)
	}
	// Leader-only work (lease timers, waiters) starts over from the new
	// state.
	n.lead.Restart()
	n.log.Info("restored from backup", "backup_index", backup.Header.AppliedIndex, "backup_epoch", backup.Header.Epoch,
		"backup_last_token", backup.Header.LastToken, "epoch", img.Header.Epoch, "keys", len(img.Keys),
		"dropped_locks", len(backup.Locks), "took", time.Since(start))
	return img.Header, nil
}
