package api

import "github.com/fencer-io/fencer/api/wire"

// The JSON bodies of the HTTP API live in package wire, so that clients can
// depend on the contract without the server; these aliases keep them
// reachable as api.X.
type (
	AcquireRequest   = wire.AcquireRequest
	Grant            = wire.Grant
	LeaseRequest     = wire.LeaseRequest
	RenewResponse    = wire.RenewResponse
	ReleaseResponse  = wire.ReleaseResponse
	LockStatus       = wire.LockStatus
	LockList         = wire.LockList
	CheckResponse    = wire.CheckResponse
	PutResponse      = wire.PutResponse
	ClusterStatus    = wire.ClusterStatus
	Member           = wire.Member
	StateDigest      = wire.StateDigest
	AddMemberRequest = wire.AddMemberRequest
	TransferRequest  = wire.TransferRequest
)
