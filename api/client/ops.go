package client

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"

	"github.com/fencer-io/fencer/api/client/internal/transport"
	"github.com/fencer-io/fencer/api/wire"
)

// Lock returns a lock's status (linearizable, from the leader).
func (c *Client) Lock(ctx context.Context, name string) (wire.LockStatus, error) {
	var st wire.LockStatus
	err := c.tr.GetJSON(ctx, lockPath(name, ""), nil, &st)
	return st, err
}

// Locks returns every held lock.
func (c *Client) Locks(ctx context.Context) ([]wire.LockStatus, error) {
	var list wire.LockList
	err := c.tr.GetJSON(ctx, "/v1/locks", nil, &list)
	return list.Locks, err
}

// Check reports whether token is the lock's current grant, and the current
// token (0 when the lock is free).
func (c *Client) Check(ctx context.Context, name string, token uint64) (wire.CheckResponse, error) {
	var out wire.CheckResponse
	q := url.Values{"token": {strconv.FormatUint(token, 10)}}
	err := c.tr.GetJSON(ctx, lockPath(name, "check"), q, &out)
	return out, err
}

// Cluster returns the cluster's status as seen by the leader (or, when no
// leader is known, by an endpoint).
func (c *Client) Cluster(ctx context.Context) (wire.ClusterStatus, error) {
	var st wire.ClusterStatus
	err := c.tr.GetJSON(ctx, "/v1/cluster", nil, &st)
	return st, err
}

// PutOption tunes PutFenced.
type PutOption func(*http.Header)

// WithLock makes a fenced write also require that token is the named lock's
// current grant (Fencing-Lock), so that a holder whose lease has ended is
// refused even before anybody newer writes.
func WithLock(name string) PutOption {
	return func(h *http.Header) { h.Set(wire.HeaderLock, name) }
}

// PutFenced stores value under key if token is greater than the key's last
// token. A zero token is sent as no token, which the server refuses
// (ErrMissingToken).
//
// Retries: a fenced write cannot be repeated blindly, because the repeat
// carries the same token and is refused as stale if the first attempt
// landed. So when an attempt went out but its answer was lost and a later
// attempt fails, PutFenced reports ErrOutcomeUnknown (wrapping the later
// error, e.g. ErrStaleToken): the value may or may not have been written.
// Read the key to find out: its token equals yours if it was.
//
// Only an answer that names the key and token is a stored write: any other
// is ErrBadAnswer, which also leaves unknown whether the value was written.
func (c *Client) PutFenced(ctx context.Context, key string, value []byte, token uint64, opts ...PutOption) error {
	h := http.Header{"Content-Type": {"application/octet-stream"}}
	if token != 0 {
		h.Set(wire.HeaderToken, strconv.FormatUint(token, 10))
	}
	for _, o := range opts {
		o(&h)
	}
	if value == nil {
		value = []byte{}
	}
	r := &transport.Request{Method: http.MethodPut, Path: "/v1/kv/" + url.PathEscape(key), Body: value, Header: h}
	resp, err := c.tr.Do(ctx, r)
	if err != nil && r.Uncertain && !errors.Is(err, ErrOutcomeUnknown) && !errors.Is(err, ErrInvalid) && !errors.Is(err, ErrMissingToken) {
		return fmt.Errorf("%w: an earlier attempt may have written %q with token %d: %w", ErrOutcomeUnknown, key, token, err)
	}
	if err != nil {
		return err
	}
	var out wire.PutResponse
	if err := c.tr.Decode(resp, &out); err != nil {
		return err
	}
	return checkPut(out, key, token)
}

// DeleteKey removes a fenced key and its mark (operators only when the
// cluster has an ACL), so that the next fenced write to it is accepted
// whatever its token. It returns the mark the key had; a key that does not
// exist is ErrNotFound.
func (c *Client) DeleteKey(ctx context.Context, key string) (wire.DeleteKeyResponse, error) {
	var out wire.DeleteKeyResponse
	r := &transport.Request{Method: http.MethodDelete, Path: "/v1/kv/" + url.PathEscape(key)}
	resp, err := c.tr.Do(ctx, r)
	if err != nil && r.Uncertain && errors.Is(err, ErrNotFound) {
		return out, fmt.Errorf("%w: an earlier attempt may have deleted %q: %w", ErrOutcomeUnknown, key, err)
	}
	if err != nil {
		return out, err
	}
	if err := c.tr.Decode(resp, &out); err != nil {
		return out, fmt.Errorf("DELETE /v1/kv/%s: %w", key, err)
	}
	return out, nil
}

// Get reads a fenced key: its value and the token that wrote it.
func (c *Client) Get(ctx context.Context, key string) ([]byte, uint64, error) {
	resp, err := c.tr.Do(ctx, &transport.Request{Method: http.MethodGet, Path: "/v1/kv/" + url.PathEscape(key)})
	if err != nil {
		return nil, 0, err
	}
	token, ok := wire.ParseToken(resp.Header.Get(wire.HeaderToken))
	if !ok {
		return nil, 0, fmt.Errorf("%w: GET /v1/kv/%s: answer has no valid %s header", ErrBadAnswer, key, wire.HeaderToken)
	}
	return resp.Body, token, nil
}
