// Package peers is a node's calls to the other members' HTTP APIs: a join
// through the leader, the probe of the members it was told about, a removal
// by the new leader, each member's own status. All go through api/client and
// api/wire, like any client's, with the node's credential.
package peers

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/fencer-io/fencer/api/client"
	"github.com/fencer-io/fencer/api/wire"
	"github.com/fencer-io/fencer/cluster/internal/membership"
)

var (
	// ErrUnauthorized: another member refused this node's credential.
	ErrUnauthorized = errors.New("unauthorized")
	// ErrNoNewLeader: leadership moved, but no other member took over and
	// removed this node before the context ended.
	ErrNoNewLeader = errors.New("no new leader removed this node")
)

// Client calls the other members as one node, with its credential: its
// certificate when the cluster runs TLS, else the cluster secret when it
// has one (see acl).
type Client struct {
	id     string
	secret string
	tls    *tls.Config
	hc     *http.Client
}

// New is a Client for the node id, presenting tlsClient's certificate when
// set, else secret when set.
func New(id, secret string, tlsClient *tls.Config) *Client {
	return &Client{
		id:     id,
		secret: secret,
		tls:    tlsClient,
		// Node-to-node calls are rare (joins, probes, removals): a fresh
		// connection each, so none outlives a peer that restarted.
		hc: &http.Client{Transport: &http.Transport{TLSClientConfig: tlsClient, DisableKeepAlives: true}},
	}
}

// api is an API client for the members at addrs. Each attempt is bounded by
// timeout.
func (c *Client) api(addrs []string, timeout time.Duration, attempts int) (*client.Client, error) {
	opts := []client.Option{
		client.WithHTTPClient(c.hc),
		client.WithTimeout(timeout),
		client.WithRetry(client.Retry{Attempts: attempts}),
	}
	switch {
	case c.tls != nil:
		opts = append(opts, client.WithTLS(c.tls))
	case c.secret != "":
		opts = append(opts, client.WithNodeCredential(c.id, c.secret))
	}
	return client.New(addrs, opts...)
}

// Join sends req to the cluster through the members at targets, one attempt
// each (the client finds the leader). A refusal of the join is
// membership.ErrConflict, one of the credential ErrUnauthorized, each with
// the member's message.
func (c *Client) Join(ctx context.Context, targets []string, req wire.JoinRequest) error {
	api, err := c.api(targets, 10*time.Second, len(targets))
	if err != nil {
		return err
	}
	return refusal(api.Join(ctx, req))
}

// refusal gives a member's refusal of a join the sentinel that says what
// it means, with the member's message.
func refusal(err error) error {
	var apiErr *client.APIError
	switch {
	case !errors.As(err, &apiErr):
		return err
	case apiErr.Code == wire.CodeMemberConflict:
		return &refused{sentinel: membership.ErrConflict, msg: apiErr.Message}
	case apiErr.Status == http.StatusUnauthorized || apiErr.Status == http.StatusForbidden:
		return &refused{sentinel: ErrUnauthorized, msg: fmt.Sprintf("%d %s: members need a credential the others accept: "+
			"with TLS their certificates from the cluster CA, else the same cluster secret on every node", apiErr.Status, apiErr.Message)}
	}
	return err
}

// refused is another member's error answer, matching the sentinel that
// says what it means.
type refused struct {
	sentinel error
	msg      string
}

func (e *refused) Error() string { return e.msg }
func (e *refused) Unwrap() error { return e.sentinel }

// Probe asks the members at addrs, in turn, whether a cluster already runs,
// and which. The first that knows a leader or a cluster id answers for all.
func (c *Client) Probe(ctx context.Context, addrs []string) membership.View {
	if len(addrs) == 0 {
		return membership.View{}
	}
	api, err := c.api(addrs, time.Second, 1)
	if err != nil {
		return membership.View{}
	}
	for _, addr := range addrs {
		st, err := api.MemberStatus(ctx, addr)
		if err == nil && (st.Leader != "" || st.ClusterID != "") {
			return membership.View{Running: st.Leader != "", ClusterID: st.ClusterID}
		}
	}
	return membership.View{}
}

// RemoveSelf asks the leader that took over from this node to remove the
// member id, retrying until a new leader answers or ctx ends (then
// ErrNoNewLeader). leader says who leads now, as the node knows it.
func (c *Client) RemoveSelf(ctx context.Context, id string, leader func() (id, httpAddr string)) error {
	for {
		if leaderID, addr := leader(); leaderID != "" && leaderID != c.id && addr != "" {
			api, err := c.api([]string{addr}, 10*time.Second, 1)
			if err != nil {
				return err
			}
			err = api.RemoveMember(ctx, id)
			var apiErr *client.APIError
			switch {
			case err == nil:
				return nil
			case errors.As(err, &apiErr) && apiErr.Status != http.StatusServiceUnavailable:
				return fmt.Errorf("new leader %s refused the removal: %w", leaderID, err)
			}
		}
		select {
		case <-ctx.Done():
			return ErrNoNewLeader
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// statusTimeout bounds how long Statuses waits for a member: an unreachable
// one is reported as such rather than holding up the others.
const statusTimeout = time.Second

// Statuses asks every member of self's view for its own view (state, term,
// commit and applied index, last contact), in parallel, and answers for
// the node itself (self) without a request.
func (c *Client) Statuses(ctx context.Context, self wire.ClusterStatus) wire.MemberStatusList {
	out := wire.MemberStatusList{Node: self.Node, Members: make([]wire.MemberStatus, len(self.Members))}
	var addrs []string
	for _, m := range self.Members {
		if m.HTTPAddr != "" {
			addrs = append(addrs, m.HTTPAddr)
		}
	}
	api, cerr := c.api(addrs, statusTimeout, 1)
	ctx, cancel := context.WithTimeout(ctx, statusTimeout)
	defer cancel()
	var wg sync.WaitGroup
	for i, m := range self.Members {
		ms := &out.Members[i]
		ms.Member = m
		switch {
		case m.ID == self.Node:
			ms.Fill(self)
		case m.HTTPAddr == "":
			ms.State, ms.Error = "unknown", "its HTTP address is not recorded yet"
		case cerr != nil:
			ms.State, ms.Error = "unreachable", cerr.Error()
		default:
			wg.Add(1)
			go func() {
				defer wg.Done()
				st, err := api.MemberStatus(ctx, m.HTTPAddr)
				if err != nil {
					ms.State, ms.Error = "unreachable", err.Error()
					return
				}
				ms.Fill(st)
			}()
		}
	}
	wg.Wait()
	return out
}

// LastIndexes asks the members at addrs (by id) for their last log index,
// in parallel, each within timeout; a member that does not answer is left
// out.
func (c *Client) LastIndexes(ctx context.Context, addrs map[string]string, timeout time.Duration) map[string]uint64 {
	out := map[string]uint64{}
	var list []string
	for _, a := range addrs {
		list = append(list, a)
	}
	api, err := c.api(list, timeout, 1)
	if len(list) == 0 || err != nil {
		return out
	}
	var (
		mu sync.Mutex
		wg sync.WaitGroup
	)
	for id, addr := range addrs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			st, err := api.MemberStatus(ctx, addr)
			if err != nil {
				return
			}
			mu.Lock()
			defer mu.Unlock()
			out[id] = st.LastIndex
		}()
	}
	wg.Wait()
	return out
}
