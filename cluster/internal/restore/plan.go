// Package restore plans the state a restore installs, from a backup and the
// current state, so that every token issued afterwards is larger than every
// token the old cluster ever issued, including those issued after the backup
// was taken, which the backup cannot know. The rule:
//
//   - the epoch becomes max(backup epoch + 1, current epoch + 1, min epoch),
//     so new tokens (epoch<<40 | index) exceed every token of the backup's
//     epoch whatever its log index was; never more than entry.LastEpoch
//     (16,777,215), the last epoch whose tokens fit in 64 bits: a restore
//     that would move past it is refused (ErrInvalidEpoch), as is a backup
//     whose epoch leaves no room above it (ErrInvalidSnapshot);
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
// itself restored or recovered after the backup), the min epoch must be
// above it.
package restore

import (
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/fencer-io/fencer/fsm/entry"
	"github.com/fencer-io/fencer/fsm/snapshot"
)

// The refusals of a restore (cluster's ErrInvalidSnapshot and
// ErrInvalidEpoch are these errors).
var (
	// ErrInvalidSnapshot: a backup could not be read, or no log could
	// have written it.
	ErrInvalidSnapshot = errors.New("invalid snapshot")
	// ErrInvalidEpoch: a restore or recovery would move the token epoch
	// past entry.LastEpoch, leaving no token to issue.
	ErrInvalidEpoch = errors.New("invalid epoch")
)

// Plan builds the state a restore installs, by the rule of the package
// doc, from the backup and the current state, to be applied at index in
// term. A backup
// that leaves the epoch no room above it is ErrInvalidSnapshot; a restore
// that would move the epoch past entry.LastEpoch is ErrInvalidEpoch. Either
// way nothing is installed, where before the epoch wrapped to 0 or moved
// past the token space and every later acquire failed.
func Plan(backup, cur *snapshot.Image, minEpoch, index, term uint64) (*snapshot.Image, error) {
	if err := snapshot.CheckBackupHeader(backup.Header); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidSnapshot, err)
	}
	epoch, err := snapshot.RestoreEpoch(backup.Header.Epoch, cur.Header.Epoch, minEpoch)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidEpoch, err)
	}
	img := &snapshot.Image{Header: backup.Header}
	img.Header.Epoch = epoch
	// Every grant of an earlier epoch is void from here on, and fenced
	// writes with its tokens are refused whatever the key's mark.
	img.Header.EpochFloor = epoch
	img.Header.LastToken = max(backup.Header.LastToken, cur.Header.LastToken)
	img.Header.ClusterID = cur.Header.ClusterID
	img.Members = cur.Members
	img.Keys = mergeKeys(backup.Keys, cur.Keys)
	img.Header.AppliedIndex, img.Header.Term = index, term
	img.Header.Locks, img.Header.Keys, img.Header.Members, img.Header.Requests, img.Header.Delays, img.Header.Permits = 0, len(img.Keys), len(img.Members), 0, 0, 0
	// Sessions end with the grants they held: a restored cluster has none.
	img.Header.Sessions, img.Header.EndedSessions = 0, 0
	img.Header.SharedLocks, img.Header.SharedGrants = 0, 0   // no shared grant either; the history's are cur's (Void)
	img.Header.MemberKeys = snapshot.MemberKeys(img.Members) // this cluster's members, not the backup's
	// This cluster's durable waiters keep their places (their clients
	// wait now, the backup's are long gone); the grants they got are void
	// with the others.
	img.DurableWaiters = cur.DurableWaiters
	img.Header.DurableWaiters, img.Header.Waited = len(cur.DurableWaiters), 0
	// The grants held now are void from index on: every member reports
	// them from the snapshot (not from what it held), and the grant
	// history (this cluster's, not the backup's) says so. A grant applied
	// between reading cur and installing the snapshot is in neither
	// (docs/operations.md).
	img.Void(cur, index)
	return img, nil
}

// mergeKeys keeps, for every key, the entry with the higher token, sorted.
func mergeKeys(a, b []entry.FencedKey) []entry.FencedKey {
	byKey := map[string]entry.FencedKey{}
	for _, list := range [][]entry.FencedKey{a, b} {
		for _, k := range list {
			if old, ok := byKey[k.Key]; !ok || k.Token > old.Token {
				byKey[k.Key] = k
			}
		}
	}
	out := make([]entry.FencedKey, 0, len(byKey))
	for _, k := range slices.Sorted(maps.Keys(byKey)) {
		out = append(out, byKey[k])
	}
	return out
}
