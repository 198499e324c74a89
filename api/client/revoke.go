package client

import (
	"context"
	"errors"

	"github.com/fencer-io/fencer/api/client/internal/transport"
	"github.com/fencer-io/fencer/api/wire"
)

// An operator's revoke ends another's grant, or a session and every grant
// under it, now, as an expiry would (api/wire/revoke.go). The holder's
// Lease (or Session, and every Lease under it) ends at its next renewal,
// with an error matching ErrRevoked (and ErrLeaseLost): a refusal ends a
// lease at once, never at its deadline.

// RevokeLock ends the lock's grant with token (operators only). A retry
// after a lost answer that finds the grant revoked already is a success,
// answered with the token alone.
func (c *Client) RevokeLock(ctx context.Context, name string, token uint64) (wire.RevokeResponse, error) {
	return c.revokeKind(ctx, "locks", name, token)
}

// RevokePermit ends the semaphore's permit with token (operators only).
func (c *Client) RevokePermit(ctx context.Context, name string, token uint64) (wire.RevokeResponse, error) {
	return c.revokeKind(ctx, "semaphores", name, token)
}

func (c *Client) revokeKind(ctx context.Context, kind, name string, token uint64) (wire.RevokeResponse, error) {
	r := &transport.Request{Path: kindPath(kind, name, "revoke")}
	var out wire.RevokeResponse
	err := c.tr.PostJSON(ctx, r, wire.RevokeRequest{Token: token}, &out)
	if err != nil && r.Uncertain && errors.Is(err, ErrRevoked) {
		// An earlier attempt revoked it.
		out = wire.RevokeResponse{Token: token}
		if kind == "locks" {
			out.Lock = name
		} else {
			out.Semaphore = name
		}
		return out, nil
	}
	return out, err
}

// RevokeSession ends session id and every grant under it (operators
// only), answering with the grants it ended. A retry after a lost answer
// that finds it revoked already is a success, with no grants listed.
func (c *Client) RevokeSession(ctx context.Context, id uint64) (wire.SessionRevokeResponse, error) {
	r := &transport.Request{Path: sessionPath(id, "revoke")}
	var out wire.SessionRevokeResponse
	err := c.tr.PostJSON(ctx, r, struct{}{}, &out)
	if err != nil && r.Uncertain && errors.Is(err, ErrRevoked) {
		return wire.SessionRevokeResponse{Session: id, Revoked: []wire.SessionGrant{}}, nil
	}
	return out, err
}
