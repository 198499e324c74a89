package cluster

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"maps"
	"slices"
	"time"

	"github.com/hashicorp/raft"

	"github.com/fencer-io/fencer/fsm"
)

// Backup writes a consistent copy of the replicated state, read on a leader
// that has confirmed its leadership, in fencer's snapshot format.
func (n *Node) Backup(ctx context.Context, w io.Writer) (fsm.Header, error) {
	if err := n.linearizable(ctx); err != nil {
		return fsm.Header{}, err
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
// know. The rule:
//
//   - the epoch becomes max(backup epoch + 1, current epoch + 1, MinEpoch),
//     so new tokens (epoch<<40 | index) exceed every token of the backup's
//     epoch whatever its log index was;
//   - fenced keys keep their high-water marks (for a key in both the backup
//     and the current state, the higher mark wins);
//   - held locks and remembered request ids are dropped: their grants belong
//     to a cluster that no longer exists, and reviving them would let a
//     holder that lost its lock after the backup renew it again;
//   - the epoch floor becomes the new epoch: a fenced write with a token of
//     an earlier epoch is refused even above the key's restored mark (a
//     holder of the old cluster may have written past the backup's mark
//     and been superseded since, which the backup cannot know);
//   - members and the cluster id are this cluster's, not the backup's.
//
// The limit: if the old cluster's epoch had moved past the backup's (it was
// itself restored or recovered after the backup), pass MinEpoch above it.
func (n *Node) Restore(ctx context.Context, r io.Reader, opts RestoreOptions) (fsm.Header, error) {
	if err := n.awaitLeader(ctx); err != nil {
		return fsm.Header{}, err
	}
	backup, err := fsm.ReadImage(r)
	if err != nil {
		return fsm.Header{}, fmt.Errorf("%w: %v", ErrInvalidSnapshot, err)
	}
	n.configMu.Lock()
	defer n.configMu.Unlock()
	cur := n.fsm.Image()

	img := &fsm.Image{Header: backup.Header}
	img.Header.Epoch = max(backup.Header.Epoch+1, cur.Header.Epoch+1, opts.MinEpoch)
	// Every grant of an earlier epoch is void from here on, and fenced
	// writes with its tokens are refused whatever the key's mark.
	img.Header.EpochFloor = img.Header.Epoch
	img.Header.LastToken = max(backup.Header.LastToken, cur.Header.LastToken)
	img.Header.ClusterID = cur.Header.ClusterID
	img.Members = cur.Members
	img.Keys = mergeKeys(backup.Keys, cur.Keys)
	// Raft installs the snapshot at max(its index, last index)+1; say so in
	// the header so that the applied index reads right.
	index := max(n.raft.LastIndex(), backup.Header.AppliedIndex) + 1
	img.Header.AppliedIndex = index
	img.Header.Term = n.raft.CurrentTerm()
	img.Header.Locks, img.Header.Keys, img.Header.Members, img.Header.Requests = 0, len(img.Keys), len(img.Members), 0

	var buf bytes.Buffer
	if _, err := img.WriteTo(&buf); err != nil {
		return fsm.Header{}, err
	}
	meta := &raft.SnapshotMeta{Version: raft.SnapshotVersionMax, Index: index - 1, Term: img.Header.Term, Size: int64(buf.Len())}
	start := time.Now()
	if err := n.raft.Restore(meta, &buf, 2*time.Minute); err != nil {
		return fsm.Header{}, translate(err)
	}
	// Leader-only work (lease timers, waiters) starts over from the new
	// state.
	n.restartView()
	n.log.Info("restored from backup", "backup_index", backup.Header.AppliedIndex, "backup_epoch", backup.Header.Epoch,
		"backup_last_token", backup.Header.LastToken, "epoch", img.Header.Epoch, "keys", len(img.Keys),
		"dropped_locks", len(backup.Locks), "took", time.Since(start))
	return img.Header, nil
}

// mergeKeys keeps, for every key, the entry with the higher token, sorted.
func mergeKeys(a, b []fsm.FencedKey) []fsm.FencedKey {
	byKey := map[string]fsm.FencedKey{}
	for _, list := range [][]fsm.FencedKey{a, b} {
		for _, k := range list {
			if old, ok := byKey[k.Key]; !ok || k.Token > old.Token {
				byKey[k.Key] = k
			}
		}
	}
	out := make([]fsm.FencedKey, 0, len(byKey))
	for _, k := range slices.Sorted(maps.Keys(byKey)) {
		out = append(out, byKey[k])
	}
	return out
}
