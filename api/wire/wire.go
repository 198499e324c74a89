// Package wire is fencer's HTTP contract: every request and response body,
// every header, every error code and the one function that writes an error
// body (WriteError), the rules for names and node ids, and the input limits.
// The API server, its middleware, fenced resources (package fence) and the
// Go client (api/client) all speak it. It imports nothing of fencer, so a
// client or another language's port can depend on the contract alone,
// without the server, Raft or bolt.
//
// Words: a grant is one holder's hold on a lock; it has a token (its place
// in the order of all grants) and a secret (the "lease" field, proof of
// holding it for renew and release). Its lease is the time it stays valid
// without a renewal (ttl_ms). The JSON names predate these words and never
// change.
package wire

import (
	"strconv"
	"time"
)

// Headers.
const (
	// HeaderToken carries a fencing token on a fenced write, and the token
	// of the write that stored a value on a read.
	HeaderToken = "Fencing-Token"
	// HeaderLock names a lock whose current grant a fenced write's token
	// must be.
	HeaderLock = "Fencing-Lock"
	// HeaderSequence optionally numbers the writes made under one grant to a
	// fenced resource, starting at 1 (see fence.Mark.Admits).
	HeaderSequence = "Fencing-Sequence"
	// HeaderSnapshot carries a saved snapshot's header (JSON).
	HeaderSnapshot = "Fencer-Snapshot"
	// HeaderForwardedBy names the node that forwarded a request to the
	// leader; a request that carries it is never forwarded again.
	HeaderForwardedBy = "Fencer-Forwarded-By"
	// HeaderLogFormat carries JoinRequest.LogFormat on a join: a header,
	// which builds that predate it ignore, where a body field would be
	// refused (join bodies are decoded strictly).
	HeaderLogFormat = "Fencer-Log-Format"
	// HeaderMemberKey carries JoinRequest.MemberKey on a join, a header for
	// the reason HeaderLogFormat is one.
	HeaderMemberKey = "Fencer-Member-Key"
	// HeaderForwardedPrincipal names the principal the forwarding node
	// authenticated. The leader believes it only from a node presenting its
	// node certificate, and only for a node: a client's own bearer token
	// always travels with its request and is checked again.
	HeaderForwardedPrincipal = "Fencer-Forwarded-Principal"
	// HeaderIndex is the log index a read was answered at (GET /v1/locks,
	// GET /v1/kv/{key}): a watch from it misses nothing and repeats
	// nothing of what the read saw.
	HeaderIndex = "Fencer-Index"
	// HeaderLastEventID is the SSE header with which a watch resumes after
	// the last index it delivered; it wins over ?since=.
	HeaderLastEventID = "Last-Event-ID"
	// HeaderLeader, on an answer a follower forwarded from the leader,
	// names the leader's HTTP address (host:port), so that a client can
	// send its next request there directly.
	HeaderLeader = "Fencer-Leader"
	// HeaderNotLeader, on a 503 no_leader, names a node that refused a
	// request forwarded to it because it does not lead: the request did
	// nothing, and the node that forwarded it may send it to the leader it
	// learns of next.
	HeaderNotLeader = "Fencer-Not-Leader"
)

// LeaseSecretLen is the length of a grant's secret, the "lease" field an
// acquire returns and renew and release must present: 32 hexadecimal
// characters, 128 random bits.
const LeaseSecretLen = 32

// Limits on input.
const (
	MaxBodyBytes = 1 << 20
	MinTTL       = 100 * time.Millisecond
	MaxTTL       = 24 * time.Hour
	DefaultTTL   = 10 * time.Second
	MaxWait      = 60 * time.Second
	// A request id is 16 to 128 characters: long enough that one caller
	// cannot guess another's (ids are also bound to the caller's principal),
	// as the Go client's and the CLI's 32 random hex digits are.
	MinRequestIDLen = 16
	MaxRequestIDLen = 128
	// MaxLockDelay bounds an acquire's lock_delay_ms.
	MaxLockDelay = 60 * time.Second
)

// ParseToken parses a fencing token: a decimal integer from 1 to 2^64-1, with
// no sign, spaces or leading zeros. Anything else is malformed; there is no
// default, so a missing token can never pass as zero.
func ParseToken(s string) (uint64, bool) {
	if s == "" || len(s) > 20 || s[0] == '0' {
		return 0, false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, false
		}
	}
	v, err := strconv.ParseUint(s, 10, 64)
	if err != nil || v == 0 {
		return 0, false
	}
	return v, true
}

// SnapshotHeader is the first record of a snapshot file (fsm/snapshot.Header on the
// server side), as returned by snapshot save and restore. It repeats the
// fields of the format's header that a client reads, since the contract
// imports nothing of fencer (and fsm nothing of HTTP);
// TestSnapshotHeaderMirrorsFSMHeader keeps the two in step.
type SnapshotHeader struct {
	Format    string `json:"format"`
	Version   int    `json:"version"`
	ClusterID string `json:"cluster_id,omitempty"`
	Epoch     uint64 `json:"epoch"`
	// EpochFloor is set after a restore or recovery: fenced writes with
	// tokens of an earlier epoch are refused.
	EpochFloor   uint64 `json:"epoch_floor,omitempty"`
	LastToken    uint64 `json:"last_token"`
	AppliedIndex uint64 `json:"applied_index"`
	Term         uint64 `json:"term"`
	Locks        int    `json:"locks"`
	Keys         int    `json:"keys"`
	Members      int    `json:"members"`
	Requests     int    `json:"requests"`
}

// The JSON bodies of the HTTP API. They are shared by the server and the Go
// client so that both sides agree by construction.

// AcquireRequest is the body of POST /v1/locks/{name}/acquire.
type AcquireRequest struct {
	Holder    string `json:"holder"`
	TTLMillis int64  `json:"ttl_ms"`
	WaitMs    int64  `json:"wait_ms"`
	RequestID string `json:"request_id,omitempty"`
	// LockDelayMillis, when set (at most MaxLockDelay), keeps the lock from
	// everybody for that long after this grant ends by expiry; release and
	// handoff start no delay.
	LockDelayMillis int64 `json:"lock_delay_ms,omitempty"`
	// Value, at most MaxLockValue bytes of UTF-8, is published with the
	// grant in the lock's status and list: an election's leader its
	// address, say.
	Value string `json:"value,omitempty"`
	// Session and SessionLease, instead of TTLMillis, acquire under a
	// session (sessions.go): the grant lives as long as the session.
	Session      uint64 `json:"session,omitempty"`
	SessionLease string `json:"session_lease,omitempty"`
	// Mode is ModeShared or ModeExclusive; absent means exclusive. Many
	// may hold a lock in shared mode at once, one exclusively; the queue
	// is FIFO across modes, so a queued exclusive request blocks the
	// shared ones behind it.
	Mode string `json:"mode,omitempty"`
	// Durable keeps a waiter's place in the log across a leader change
	// (durable.go): it needs RequestID and WaitMs > 0.
	Durable bool `json:"durable,omitempty"`
}

// The modes of a lock's grant.
const (
	ModeShared    = "shared"
	ModeExclusive = "exclusive"
)

// MaxLockValue bounds a lock's published value.
const MaxLockValue = 4096

// ValueRequest is the body of POST /v1/locks/{name}/value.
type ValueRequest struct {
	Lease string `json:"lease"`
	Token uint64 `json:"token"`
	Value string `json:"value"`
}

// ValueResponse is the answer to a successful value change.
type ValueResponse struct {
	Lock  string `json:"lock"`
	Token uint64 `json:"token"`
	Value string `json:"value"`
}

// Grant is the answer to a successful acquire.
type Grant struct {
	Lock   string `json:"lock"`
	Holder string `json:"holder"`
	Token  uint64 `json:"token"`
	// Lease is the grant's secret (LeaseSecretLen characters), which renew
	// and release must present.
	Lease string `json:"lease"`
	// TTLMillis is the length of the lease.
	TTLMillis int64  `json:"ttl_ms"`
	RequestID string `json:"request_id,omitempty"`
	// Existing is true when this is a retry answered with the earlier grant.
	Existing bool `json:"existing,omitempty"`
	// LockDelayMillis is the grant's lock-delay, if it asked for one.
	LockDelayMillis int64 `json:"lock_delay_ms,omitempty"`
	// Value is the grant's published value, if any.
	Value string `json:"value,omitempty"`
	// Session is the session the grant lives under, if any (its TTLMillis
	// is then the session's).
	Session uint64 `json:"session,omitempty"`
	// Mode is ModeShared for a shared grant, absent for an exclusive one.
	Mode string `json:"mode,omitempty"`
	// WaitIndex is the log index of the Enqueue of the durable waiter
	// this grant was given to; absent for any other grant.
	WaitIndex uint64 `json:"wait_index,omitempty"`
}

// LeaseRequest is the body of renew and release: the grant's secret and
// token.
type LeaseRequest struct {
	Lease string `json:"lease"`
	Token uint64 `json:"token"`
}

// RenewResponse is the answer to a successful renewal.
type RenewResponse struct {
	Lock      string `json:"lock"`
	Token     uint64 `json:"token"`
	TTLMillis int64  `json:"ttl_ms"`
}

// ReleaseResponse is the answer to a successful release.
type ReleaseResponse struct {
	Lock     string `json:"lock"`
	Token    uint64 `json:"token"`
	Released bool   `json:"released"`
}

// LockStatus describes a lock and its grant, if held; it never includes the
// grant's secret.
type LockStatus struct {
	Lock      string `json:"lock"`
	Held      bool   `json:"held"`
	Holder    string `json:"holder,omitempty"`
	Token     uint64 `json:"token,omitempty"`
	TTLMillis int64  `json:"ttl_ms,omitempty"`
	// RemainingMillis is the leader's view of the lease's time left; absent
	// on a stale read from a follower, which does not track deadlines.
	RemainingMillis *int64 `json:"remaining_ms,omitempty"`
	// LockDelayMillis is the held grant's lock-delay, if it asked for one.
	LockDelayMillis int64 `json:"lock_delay_ms,omitempty"`
	// Value is the held grant's published value, if any.
	Value string `json:"value,omitempty"`
	// DelayRemainingMillis is the time left of a free lock's running
	// lock-delay, during which no acquire succeeds; absent when none runs.
	DelayRemainingMillis *int64 `json:"delay_remaining_ms,omitempty"`
	// Waiters counts the acquires queued for the lock on the answering
	// node (the leader, unless the read was stale); absent when none.
	Waiters int `json:"waiters,omitempty"`
	// Session is the session the held grant lives under, if any.
	Session uint64 `json:"session,omitempty"`
	// SharedHolders are the lock's shared grants, oldest first, when it is
	// held in shared mode (Held and the fields above describe an
	// exclusive grant only, and are then false and absent).
	SharedHolders []SharedHolder `json:"shared_holders,omitempty"`
}

// SharedHolder is one shared grant of a lock, as its status lists it.
type SharedHolder struct {
	Holder    string `json:"holder"`
	Token     uint64 `json:"token"`
	TTLMillis int64  `json:"ttl_ms"`
	// RemainingMillis is the leader's view of the lease's time left;
	// absent on a stale read.
	RemainingMillis *int64 `json:"remaining_ms,omitempty"`
	LockDelayMillis int64  `json:"lock_delay_ms,omitempty"`
	Session         uint64 `json:"session,omitempty"`
}

// LockList is the answer to GET /v1/locks.
type LockList struct {
	Locks []LockStatus `json:"locks"`
}

// CheckResponse is the answer to GET /v1/locks/{name}/check.
type CheckResponse struct {
	Current bool   `json:"current"`
	Token   uint64 `json:"token"`
	// Mode is the mode of the asked token's grant when it is current
	// (ModeShared or ModeExclusive); absent otherwise. Token is the
	// lock's exclusive grant's (0 when it is free or held in shared mode).
	Mode string `json:"mode,omitempty"`
}

// PutResponse is the answer to a successful fenced write.
type PutResponse struct {
	Key   string `json:"key"`
	Token uint64 `json:"token"`
}

// DeleteKeyResponse is the answer to DELETE /v1/kv/{key}: the key and the
// mark it had are gone, so the next fenced write to it is accepted whatever
// its token.
type DeleteKeyResponse struct {
	Key     string `json:"key"`
	Deleted bool   `json:"deleted"`
	// LastToken is the mark the key had.
	LastToken uint64 `json:"last_token"`
}

// ClusterStatus is the answer to GET /v1/cluster.
type ClusterStatus struct {
	Node         string `json:"node"`
	State        string `json:"state"`
	Leader       string `json:"leader"`
	Term         uint64 `json:"term"`
	CommitIndex  uint64 `json:"commit_index"`
	AppliedIndex uint64 `json:"applied_index"`
	LastIndex    uint64 `json:"last_index"`
	LastContact  string `json:"last_contact,omitempty"`
	Epoch        uint64 `json:"epoch"`
	LastToken    uint64 `json:"last_token"`
	ClusterID    string `json:"cluster_id,omitempty"`
	// LogFormat is the entry format this node writes when it leads: the
	// newest every member reads (1: binary lock-cycle entries; 0: JSON only,
	// while some member runs a build from before them).
	LogFormat int      `json:"log_format"`
	Members   []Member `json:"members"`
	// GrantHistory is the cluster's grant history settings, absent while
	// it keeps none yet (they are replicated state, not this node's flags).
	GrantHistory *GrantHistorySettings `json:"grant_history,omitempty"`
}

// Member is one cluster member.
type Member struct {
	ID       string `json:"id"`
	RaftAddr string `json:"raft_addr"`
	HTTPAddr string `json:"http_addr"`
	Voter    bool   `json:"voter"`
	Leader   bool   `json:"leader"`
	// LogFormat is the newest entry format the member's build reads, as it
	// recorded when it registered (in status answers only).
	LogFormat int `json:"log_format,omitempty"`
}

// MemberStatus is one member in GET /v1/cluster/members: the member as the
// answering node records it, and what the member says of itself when asked
// (State "unreachable" and Error when it did not answer).
type MemberStatus struct {
	Member
	State        string `json:"state"`
	Term         uint64 `json:"term,omitempty"`
	CommitIndex  uint64 `json:"commit_index,omitempty"`
	AppliedIndex uint64 `json:"applied_index,omitempty"`
	LastIndex    uint64 `json:"last_index,omitempty"`
	LastContact  string `json:"last_contact,omitempty"`
	Epoch        uint64 `json:"epoch,omitempty"`
	// Leader is who the member believes leads (its own ClusterStatus's
	// leader), beside Member.Leader, the answering node's belief.
	SeesLeader string `json:"sees_leader,omitempty"`
	Error      string `json:"error,omitempty"`
}

// Fill copies a member's own ClusterStatus into s.
func (s *MemberStatus) Fill(st ClusterStatus) {
	s.State, s.Term, s.CommitIndex, s.AppliedIndex, s.LastIndex = st.State, st.Term, st.CommitIndex, st.AppliedIndex, st.LastIndex
	s.LastContact, s.Epoch, s.SeesLeader = st.LastContact, st.Epoch, st.Leader
}

// MemberStatusList is the answer to GET /v1/cluster/members: every member's
// own view, gathered by the answering node (Node).
type MemberStatusList struct {
	Node    string         `json:"node"`
	Members []MemberStatus `json:"members"`
}

// WhoAmI is the answer to GET /v1/whoami: the caller as the node's access
// control sees it. Without an ACL (ACL false) every caller may do
// everything, and Role is "operator".
type WhoAmI struct {
	ACL  bool   `json:"acl"`
	Name string `json:"name,omitempty"`
	Role string `json:"role"`
	// Locks and Keys are the caller's prefixes, "*" every name. No locks
	// means every lock; no keys means no key.
	Locks []string `json:"locks,omitempty"`
	Keys  []string `json:"keys,omitempty"`
}

// StateDigest is the answer to GET /v1/debug/state: a hash of the replicated
// state, equal on members that applied the same log.
type StateDigest struct {
	Node         string `json:"node"`
	AppliedIndex uint64 `json:"applied_index"`
	Digest       string `json:"digest"`
}

// AddMemberRequest is the body of POST /v1/cluster/members.
type AddMemberRequest struct {
	ID       string `json:"id"`
	RaftAddr string `json:"raft_addr"`
	HTTPAddr string `json:"http_addr"`
	Voter    *bool  `json:"voter,omitempty"` // default true
}

// JoinRequest is the body of POST /v1/cluster/join, which a node sends to be
// made a member (the leader answers it; any member forwards it).
type JoinRequest struct {
	ID          string `json:"id"`
	RaftAddr    string `json:"raft_addr"`
	HTTPAddr    string `json:"http_addr"`
	Voter       bool   `json:"voter"`
	Incarnation string `json:"incarnation,omitempty"`
	// LogFormat is the newest entry format the joiner's build reads; zero
	// from builds that predate it. It travels in HeaderLogFormat, not the
	// body, which older builds decode strictly.
	LogFormat int `json:"-"`
	// ClusterID is the cluster the joiner's data dir belongs to, if any.
	ClusterID string `json:"cluster_id,omitempty"`
	// Replace removes a member of the same id first, even when its data
	// dir was wiped (a new incarnation). The operator vouches that the old
	// incarnation is gone for good.
	Replace bool `json:"replace,omitempty"`
	// DryRun only asks whether the join would be accepted; nothing changes.
	DryRun bool `json:"dry_run,omitempty"`
	// MemberKey is the joiner's member key (MemberKeyString of its public
	// half), which the leader records so that the member can sign its
	// requests to the others (AuthSchemeMember); "" from builds that
	// predate it, and from an operator's add. It travels in
	// HeaderMemberKey.
	MemberKey string `json:"-"`
}

// JoinResponse is the answer to a successful join.
type JoinResponse struct {
	Joined string `json:"joined"`
}

// TransferRequest is the body of POST /v1/cluster/leader/transfer.
type TransferRequest struct {
	ID string `json:"id,omitempty"`
}

// TransferResponse is the answer to a successful leadership transfer.
type TransferResponse struct {
	// To is the member asked for; empty when the leader chose.
	To          string `json:"to"`
	Transferred string `json:"transferred"` // always "ok"
}

// RemoveMemberResponse is the answer to DELETE /v1/cluster/members/{id}.
type RemoveMemberResponse struct {
	Removed string `json:"removed"`
}

// Health is the answer to GET /healthz ("ok": the process serves) and to
// GET /readyz ("ready": the node can serve every command its cluster's
// members read: it knows a leader, has applied up to the commit index, and
// the cluster's own first entries, the members' formats and the grant
// history settings, are applied).
type Health struct {
	Node   string `json:"node"`
	Status string `json:"status"`
	// LogFormat (readyz) is the log format every member reads; Note says
	// what is refused when it is below this build's (a rolling upgrade).
	LogFormat int    `json:"log_format,omitempty"`
	Note      string `json:"note,omitempty"`
}

// SemAcquireRequest is the body of POST /v1/semaphores/{name}/acquire.
type SemAcquireRequest struct {
	Holder string `json:"holder"`
	// Limit is the number of permits, 1 to MaxSemaphoreLimit; it must equal
	// the semaphore's while any permit is held.
	Limit     int    `json:"limit"`
	TTLMillis int64  `json:"ttl_ms"`
	WaitMs    int64  `json:"wait_ms"`
	RequestID string `json:"request_id,omitempty"`
	// LockDelayMillis, when set (at most MaxLockDelay), keeps this
	// permit's slot from being granted again for that long if the permit
	// ends by expiry (not by release): acquires that would need it get 409
	// lock_delay with retry_after_ms; waiters keep waiting.
	LockDelayMillis int64 `json:"lock_delay_ms,omitempty"`
	// Session and SessionLease, instead of TTLMillis, acquire the permit
	// under a session (sessions.go).
	Session      uint64 `json:"session,omitempty"`
	SessionLease string `json:"session_lease,omitempty"`
	// Durable keeps a waiter's place in the log, as an acquire's.
	Durable bool `json:"durable,omitempty"`
}

// MaxSemaphoreLimit bounds a semaphore's limit.
const MaxSemaphoreLimit = 10_000

// PermitGrant is the answer to a successful semaphore acquire.
type PermitGrant struct {
	Semaphore string `json:"semaphore"`
	Holder    string `json:"holder"`
	Token     uint64 `json:"token"`
	// Lease is the permit's secret, which renew and release must present.
	Lease     string `json:"lease"`
	TTLMillis int64  `json:"ttl_ms"`
	Limit     int    `json:"limit"`
	// Held counts the permits held once this one is.
	Held      int    `json:"held"`
	RequestID string `json:"request_id,omitempty"`
	Existing  bool   `json:"existing,omitempty"`
	// LockDelayMillis is the permit's lock-delay, if it asked for one.
	LockDelayMillis int64 `json:"lock_delay_ms,omitempty"`
	// Session is the session the permit lives under, if any.
	Session uint64 `json:"session,omitempty"`
	// WaitIndex is as a Grant's.
	WaitIndex uint64 `json:"wait_index,omitempty"`
}

// SemRenewResponse is the answer to a successful permit renewal.
type SemRenewResponse struct {
	Semaphore string `json:"semaphore"`
	Token     uint64 `json:"token"`
	TTLMillis int64  `json:"ttl_ms"`
}

// SemReleaseResponse is the answer to a successful permit release.
type SemReleaseResponse struct {
	Semaphore string `json:"semaphore"`
	Token     uint64 `json:"token"`
	Released  bool   `json:"released"`
}

// PermitHolder is one held permit in a SemaphoreStatus (never its secret).
type PermitHolder struct {
	Holder string `json:"holder"`
	Token  uint64 `json:"token"`
	// RemainingMillis is the leader's view of the permit's time left;
	// absent on a stale read.
	RemainingMillis *int64 `json:"remaining_ms,omitempty"`
	// Session is the session the permit lives under, if any.
	Session uint64 `json:"session,omitempty"`
}

// SemaphoreStatus is the answer to GET /v1/semaphores/{name}.
type SemaphoreStatus struct {
	Semaphore string `json:"semaphore"`
	// Limit is 0 while no permit is held: the next acquire sets it.
	Limit   int            `json:"limit"`
	Holders []PermitHolder `json:"holders"`
	// Delays are the permit slots in their lock-delay: each counts against
	// the limit until it ends.
	Delays []SlotDelay `json:"delays,omitempty"`
	// Waiters counts the acquires queued on the leader.
	Waiters int `json:"waiters"`
}

// SlotDelay is a semaphore permit slot in its lock-delay: Since is the
// log index of the expiry that started it (a second slot of the semaphore
// delayed by one session's expiry is known by its permit's token, as one
// entry may start several), RemainingMillis the time left
// as the leader times it (on a follower's stale read, the full length).
type SlotDelay struct {
	Since           uint64 `json:"since"`
	RemainingMillis int64  `json:"remaining_ms"`
}

// SemaphoreList is the answer to GET /v1/semaphores.
type SemaphoreList struct {
	Semaphores []SemaphoreStatus `json:"semaphores"`
}

// PermitCheckResponse is the answer to GET /v1/semaphores/{name}/check.
type PermitCheckResponse struct {
	Current bool `json:"current"`
}
