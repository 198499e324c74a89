// Package k8sleader is a resourcelock.Interface for client-go's
// LeaderElector (and controller-runtime's
// LeaderElectionResourceLockInterface) backed by a fencer election, so that
// a Kubernetes controller's leadership comes with a fencing token.
//
// client-go's leader election gives no fencing (its own doc says so): each
// elector reads a record, compares its renew time with its own clock, and
// writes with a compare-and-swap on the API server. A leader paused past
// its lease wakes up still believing it leads, and its writes go out before
// it notices. This lock moves the decision to fencer and hands the
// controller the grant's token as its term:
//
//   - Get reads the election's state from fencer: the holder, the renew
//     time as fencer's (now minus the grant's elapsed lease, from the
//     leader's remaining_ms), and the TTL as the lease duration. An
//     election nobody holds is a record with no holder, which every elector
//     may try to take.
//   - Create and Update by an elector that holds no live grant acquire the
//     election (without waiting: the elector owns the retry loop); they
//     succeed only if fencer grants it, and the grant's token is the term.
//   - Update by the holder renews its grant, and fails once the grant is
//     lost: a lost term is never quietly replaced by a new one under the
//     same leadership, because the controller's writes carry the old
//     term. The elector stops leading, and its next campaign takes a new
//     term.
//   - Update with no holder (ReleaseOnCancel) resigns.
//
// So two electors can never both be granted the election, and an elector
// whose renewals stop (a pause, a partition) loses it after the TTL, when
// another may take it. Term is the token to send with every write the
// leadership protects (Fencing-Token, or a fence checker), so that a leader
// that wakes up late is refused by the resource; Context ends at the
// grant's local deadline, often before the elector gives up.
//
// The grant keeps no lease of its own alive (client.NoKeepAlive): the
// elector's renewals are its only renewals, so fencer frees the election
// within a TTL of the elector's last successful renewal, whatever the
// process is doing. Set TTL to the LeaderElectionConfig's LeaseDuration
// (zero takes it from the elector's records) and keep RetryPeriod well
// under it. The elector keeps believing it leads until RenewDeadline passes
// without a renewal; with RenewDeadline+RetryPeriod above the TTL less the
// client's margin that belief can outlast the grant, which the token
// catches.
//
// Which campaign a record belongs to is read from its AcquireTime, which
// the elector keeps for as long as it leads and sets anew when it takes the
// lease: the grant's value (fencer's election value) carries it, with the
// leader transitions, so that every elector's Get sees the same record. An
// Update with the AcquireTime of the current grant is a renewal of it; one
// with another is a new campaign. Records carry times in whole seconds
// (metav1.Time), so AcquireTimes compare by the second: a new campaign by
// the same identity in the same second as its lost one is refused until the
// next second, which costs a retry and nothing else.
//
// One Lock serves one elector: it keeps that elector's grant.
package k8sleader
