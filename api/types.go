package api

// The JSON bodies of the HTTP API. They are shared by the server and the Go
// client so that both sides agree by construction.

// AcquireRequest is the body of POST /v1/locks/{name}/acquire.
type AcquireRequest struct {
	Holder    string `json:"holder"`
	TTLMillis int64  `json:"ttl_ms"`
	WaitMs    int64  `json:"wait_ms"`
	RequestID string `json:"request_id,omitempty"`
}

// Grant is the answer to a successful acquire.
type Grant struct {
	Lock      string `json:"lock"`
	Holder    string `json:"holder"`
	Token     uint64 `json:"token"`
	Lease     string `json:"lease"`
	TTLMillis int64  `json:"ttl_ms"`
	RequestID string `json:"request_id,omitempty"`
	// Existing is true when this is a retry answered with the earlier grant.
	Existing bool `json:"existing,omitempty"`
}

// LeaseRequest is the body of renew and release.
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

// LockStatus describes a lock; it never includes the lease secret.
type LockStatus struct {
	Lock      string `json:"lock"`
	Held      bool   `json:"held"`
	Holder    string `json:"holder,omitempty"`
	Token     uint64 `json:"token,omitempty"`
	TTLMillis int64  `json:"ttl_ms,omitempty"`
	// RemainingMillis is the leader's view of the lease's time left; absent
	// on a stale read from a follower, which does not track deadlines.
	RemainingMillis *int64 `json:"remaining_ms,omitempty"`
}

// LockList is the answer to GET /v1/locks.
type LockList struct {
	Locks []LockStatus `json:"locks"`
}

// CheckResponse is the answer to GET /v1/locks/{name}/check.
type CheckResponse struct {
	Current bool   `json:"current"`
	Token   uint64 `json:"token"`
}

// PutResponse is the answer to a successful fenced write.
type PutResponse struct {
	Key   string `json:"key"`
	Token uint64 `json:"token"`
}

// ClusterStatus is the answer to GET /v1/cluster.
type ClusterStatus struct {
	Node         string   `json:"node"`
	State        string   `json:"state"`
	Leader       string   `json:"leader"`
	Term         uint64   `json:"term"`
	CommitIndex  uint64   `json:"commit_index"`
	AppliedIndex uint64   `json:"applied_index"`
	LastIndex    uint64   `json:"last_index"`
	LastContact  string   `json:"last_contact,omitempty"`
	Epoch        uint64   `json:"epoch"`
	LastToken    uint64   `json:"last_token"`
	ClusterID    string   `json:"cluster_id,omitempty"`
	Members      []Member `json:"members"`
}

// Member is one cluster member.
type Member struct {
	ID       string `json:"id"`
	RaftAddr string `json:"raft_addr"`
	HTTPAddr string `json:"http_addr"`
	Voter    bool   `json:"voter"`
	Leader   bool   `json:"leader"`
}

// StateDigest is the answer to GET /v1/debug/state: a hash of the replicated
// state, equal on members that applied the same log.
type StateDigest struct {
	Node         string `json:"node"`
	AppliedIndex uint64 `json:"applied_index"`
	Digest       string `json:"digest"`
}
