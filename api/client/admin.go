package client

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"

	"github.com/fencer-io/fencer/api/client/internal/transport"
	"github.com/fencer-io/fencer/api/wire"
)

// AddMember adds a member (a voter unless voter is false).
func (c *Client) AddMember(ctx context.Context, id, raftAddr, httpAddr string, voter bool) error {
	var out wire.Member
	return c.tr.PostJSON(ctx, &transport.Request{Path: "/v1/cluster/members"}, wire.AddMemberRequest{ID: id, RaftAddr: raftAddr, HTTPAddr: httpAddr, Voter: &voter}, &out)
}

// Join asks the cluster to make a node a member (what a node sends about
// itself when it starts; operators use AddMember). A join is idempotent, so
// it is retried like any other request.
func (c *Client) Join(ctx context.Context, req wire.JoinRequest) error {
	r := &transport.Request{Path: "/v1/cluster/join", Header: http.Header{}}
	if req.LogFormat > 0 {
		r.Header.Set(wire.HeaderLogFormat, strconv.Itoa(req.LogFormat))
	}
	if req.MemberKey != "" {
		r.Header.Set(wire.HeaderMemberKey, req.MemberKey)
	}
	var out wire.JoinResponse
	return c.tr.PostJSON(ctx, r, req, &out)
}

// RemoveMember removes a member; removing the leader transfers leadership
// first.
func (c *Client) RemoveMember(ctx context.Context, id string) error {
	_, err := c.tr.Do(ctx, &transport.Request{Method: http.MethodDelete, Path: "/v1/cluster/members/" + url.PathEscape(id)})
	return err
}

// TransferLeader hands leadership to id, or to the best follower when id is
// empty.
func (c *Client) TransferLeader(ctx context.Context, id string) error {
	var out map[string]string
	return c.tr.PostJSON(ctx, &transport.Request{Path: "/v1/cluster/leader/transfer"}, wire.TransferRequest{ID: id}, &out)
}

// MemberStatus asks one member, not the leader, for its own view: its Raft
// state and when it last heard from the leader.
func (c *Client) MemberStatus(ctx context.Context, httpAddr string) (wire.ClusterStatus, error) {
	base, err := transport.BaseURL(httpAddr, c.tls != nil)
	if err != nil {
		return wire.ClusterStatus{}, err
	}
	return c.tr.ClusterStatus(ctx, base)
}

// SnapshotSave writes a consistent snapshot taken on the leader to w and
// returns its header.
func (c *Client) SnapshotSave(ctx context.Context, w io.Writer) (wire.SnapshotHeader, error) {
	resp, err := c.stream(ctx, http.MethodGet, "/v1/cluster/snapshot", nil, nil)
	if err != nil {
		return wire.SnapshotHeader{}, err
	}
	defer resp.Body.Close()
	var h wire.SnapshotHeader
	if err := json.Unmarshal([]byte(resp.Header.Get(wire.HeaderSnapshot)), &h); err != nil {
		return h, fmt.Errorf("snapshot header: %w", err)
	}
	n, err := io.Copy(w, resp.Body)
	if err != nil {
		return h, err
	}
	if resp.ContentLength >= 0 && n != resp.ContentLength {
		return h, fmt.Errorf("snapshot truncated: %d of %d bytes", n, resp.ContentLength)
	}
	return h, nil
}

// SnapshotRestore uploads a backup to the leader; see the README for the
// token rule. minEpoch 0 means no minimum.
func (c *Client) SnapshotRestore(ctx context.Context, snapshot []byte, minEpoch uint64) (wire.SnapshotHeader, error) {
	q := url.Values{}
	if minEpoch > 0 {
		q.Set("min_epoch", strconv.FormatUint(minEpoch, 10))
	}
	resp, err := c.stream(ctx, http.MethodPost, "/v1/cluster/restore", q, snapshot)
	if err != nil {
		return wire.SnapshotHeader{}, err
	}
	defer resp.Body.Close()
	var h wire.SnapshotHeader
	return h, json.NewDecoder(resp.Body).Decode(&h)
}

// stream sends one request to the leader and hands back the open response;
// non-2xx answers become *APIError. Snapshots are too large for Do's
// buffered answers, and saving or restoring is not retried blindly.
func (c *Client) stream(ctx context.Context, method, path string, q url.Values, body []byte) (*http.Response, error) {
	resp, err := c.tr.Open(ctx, c.tr.Target(ctx), method, path, q, nil, bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	if resp.StatusCode/100 != 2 {
		defer resp.Body.Close()
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		return nil, newAPIError(resp.StatusCode, b)
	}
	return resp, nil
}
