// Package peers is a node's calls to the other members' HTTP APIs: a join
// through the leader, the probe of the members it was told about, a removal
// by the new leader, each member's own status. All go through api/client and
// api/wire, like any client's, with the node's credential, over one kept
// transport.
package peers

import (
	"context"
	"crypto/ed25519"
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
// certificate when the cluster runs TLS, else its signature with its member
// key (wire.AuthSchemeMember), or the cluster secret where only that is
// accepted (see acl). The cluster secret goes only where a join goes: to
// the members the node was told to join through and to the leader; a call
// to every member (their statuses, their last indexes) carries the
// signature alone, which is useless anywhere but at the address it was
// made for, so a member record an operator pointed elsewhere collects
// nothing that works elsewhere (F7).
type Client struct {
	id    string
	creds Credentials
	// signed and plain share one transport, kept for the node's life, so
	// that the members view reuses its connections to each member (it
	// once opened new ones on every call: 600 calls left 1,193 sockets in
	// TIME-WAIT).
	transport *http.Transport
	signed    *http.Client
	plain     *http.Client
}

// Credentials are what a node can present to the other members.
type Credentials struct {
	// Secret is the cluster secret; "" without one.
	Secret string
	// TLS carries the node certificate; nil without TLS.
	TLS *tls.Config
	// Key is the node's member key; nil without one.
	Key ed25519.PrivateKey
	// Keyed reports whether the cluster has recorded Key for this node,
	// as the node's own replica says: then the signature is tried first
	// where the cluster secret also may be; nil: never.
	Keyed func() bool
}

// New is a Client for the node id.
func New(id string, creds Credentials) *Client {
	tr := &http.Transport{
		TLSClientConfig:     creds.TLS,
		MaxIdleConnsPerHost: 4,
		// A peer that restarted leaves a dead idle connection; the
		// transport retries an idempotent request on a fresh one, and
		// idle ones are dropped well before a member is likely to go.
		IdleConnTimeout: 30 * time.Second,
	}
	c := &Client{id: id, creds: creds, transport: tr, plain: &http.Client{Transport: tr}}
	c.signed = &http.Client{Transport: &signer{id: id, key: creds.Key, next: tr}}
	return c
}

// CloseIdle closes the kept connections (the node is stopping).
func (c *Client) CloseIdle() { c.transport.CloseIdleConnections() }

// signer signs each request with the member key, for the host it goes to.
type signer struct {
	id   string
	key  ed25519.PrivateKey
	next http.RoundTripper
}

func (s *signer) RoundTrip(r *http.Request) (*http.Response, error) {
	if s.key != nil && r.Header.Get("Authorization") == "" {
		r = r.Clone(r.Context())
		r.Header.Set("Authorization", wire.MemberAuthorization(s.key, s.id, r.URL.Host, r.Method, r.URL.RequestURI(), time.Now()))
	}
	return s.next.RoundTrip(r)
}

// credential is one way of calling the members.
type credential int

const (
	withCert      credential = iota // TLS: the node certificate
	withSignature                   // the member key's signature
	withSecret                      // the cluster secret
)

// joinCredentials are the credentials a call that may carry the cluster
// secret tries, in order (the next after a refusal): the signature first
// once the cluster has this node's key, else the secret first.
func (c *Client) joinCredentials() []credential {
	if c.creds.TLS != nil {
		return []credential{withCert}
	}
	var out []credential
	if c.creds.Key != nil {
		out = append(out, withSignature)
	}
	if c.creds.Secret != "" {
		if c.creds.Keyed == nil || !c.creds.Keyed() {
			out = append([]credential{withSecret}, out...)
		} else {
			out = append(out, withSecret)
		}
	}
	if len(out) == 0 {
		out = append(out, withSignature) // nothing to present: a cluster without access control
	}
	return out
}

// memberCredential is the credential of a call to every member: never
// the cluster secret.
func (c *Client) memberCredential() credential {
	if c.creds.TLS != nil {
		return withCert
	}
	return withSignature
}

// api is an API client for the members at addrs, presenting cred. Each
// attempt is bounded by timeout.
func (c *Client) api(addrs []string, cred credential, timeout time.Duration, attempts int) (*client.Client, error) {
	opts := []client.Option{
		client.WithTimeout(timeout),
		client.WithRetry(client.Retry{Attempts: attempts}),
	}
	switch cred {
	case withCert:
		opts = append(opts, client.WithHTTPClient(c.plain), client.WithTLS(c.creds.TLS))
	case withSecret:
		opts = append(opts, client.WithHTTPClient(c.plain), client.WithNodeCredential(c.id, c.creds.Secret))
	default:
		opts = append(opts, client.WithHTTPClient(c.signed))
	}
	return client.New(addrs, opts...)
}

// unauthorized reports whether err is a member's refusal of the credential.
func unauthorized(err error) bool {
	var apiErr *client.APIError
	return errors.As(err, &apiErr) && (apiErr.Status == http.StatusUnauthorized || apiErr.Status == http.StatusForbidden)
}

// Join sends req to the cluster through the members at targets, one attempt
// each (the client finds the leader). A refusal of the join is
// membership.ErrConflict, one of the credential ErrUnauthorized, each with
// the member's message.
func (c *Client) Join(ctx context.Context, targets []string, req wire.JoinRequest) error {
	var first error // the first refusal says most: see acl.ErrKeyedMember
	for _, cred := range c.joinCredentials() {
		api, err := c.api(targets, cred, 10*time.Second, len(targets))
		if err != nil {
			return err
		}
		if err = api.Join(ctx, req); !unauthorized(err) {
			return refusal(err)
		}
		if first == nil {
			first = err
		}
	}
	return refusal(first)
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
	// The members probed are the ones the node was told to join through,
	// which may be sent the cluster secret.
	creds := c.joinCredentials()
	keyed := false
	for _, addr := range addrs {
		for _, cred := range creds {
			api, err := c.api([]string{addr}, cred, time.Second, 1)
			if err != nil {
				return membership.View{}
			}
			st, err := api.MemberStatus(ctx, addr)
			if err == nil && (st.Leader != "" || st.ClusterID != "") {
				return membership.View{Running: st.Leader != "", ClusterID: st.ClusterID}
			}
			var apiErr *client.APIError
			if errors.As(err, &apiErr) && apiErr.Code == wire.CodeKeyedMember {
				keyed = true
			}
			if !unauthorized(err) {
				break
			}
		}
	}
	// A member that answers that this id has a key of its own is one of a
	// running cluster that knows the id, with a key the node does not hold
	// (its data dir was wiped): the node must ask to join, and be told why
	// not, rather than bootstrap afresh under its old id.
	return membership.View{Running: keyed}
}

// RemoveSelf asks the leader that took over from this node to remove the
// member id, retrying until a new leader answers or ctx ends (then
// ErrNoNewLeader). leader says who leads now, as the node knows it.
func (c *Client) RemoveSelf(ctx context.Context, id string, leader func() (id, httpAddr string)) error {
	for {
		if leaderID, addr := leader(); leaderID != "" && leaderID != c.id && addr != "" {
			// The leader is the one a join goes to; it may be sent the
			// cluster secret.
			var err error
			for _, cred := range c.joinCredentials() {
				var api *client.Client
				if api, err = c.api([]string{addr}, cred, 10*time.Second, 1); err != nil {
					return err
				}
				if err = api.RemoveMember(ctx, id); !unauthorized(err) {
					break
				}
			}
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
	api, cerr := c.api(addrs, c.memberCredential(), statusTimeout, 1)
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

// CommitIndex asks the member at addr (the leader) for its commit index,
// within timeout.
func (c *Client) CommitIndex(ctx context.Context, addr string, timeout time.Duration) (uint64, error) {
	api, err := c.api([]string{addr}, c.memberCredential(), timeout, 1)
	if err != nil {
		return 0, err
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	st, err := api.MemberStatus(ctx, addr)
	if err != nil {
		return 0, err
	}
	return st.CommitIndex, nil
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
	api, err := c.api(list, c.memberCredential(), timeout, 1)
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
