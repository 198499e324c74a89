package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/fencer-io/fencer/api/wire"
)

// request is one logical API call, sent in one or more attempts.
type request struct {
	method string
	path   string // escaped, from /v1/
	query  url.Values
	body   []byte
	header http.Header
	// extra is added to the client's per-attempt timeout (an acquire's wait).
	extra time.Duration
	// attemptTimeout, when set, replaces the client's per-attempt timeout.
	attemptTimeout time.Duration
	// untilDone retries until ctx ends instead of Retry.Attempts times.
	untilDone bool

	// Filled in by do.
	firstSent time.Time // send time of the first attempt
	sent      time.Time // send time of the attempt that answered
	retried   bool      // more than one attempt was sent
	// uncertain: an earlier attempt may have reached the leader and taken
	// effect although its answer was lost.
	uncertain bool
}

type response struct {
	status int
	header http.Header
	body   []byte
}

// retryable reports whether an answer means "try again, maybe elsewhere":
// no leader, outcome unknown, or a gateway in between that failed.
func (r *response) retryable() bool {
	switch r.status {
	case http.StatusBadGateway, http.StatusGatewayTimeout:
		return true
	case http.StatusServiceUnavailable:
		var e wire.Error
		return json.Unmarshal(r.body, &e) != nil || e.Code != wire.CodeInternal
	}
	return false
}

// do sends r to the leader (or, when none is known, to an endpoint, which
// forwards), retrying connection errors and retryable answers. An attempt
// that could not reach its node (refused, reset, timed out) goes at once to
// another endpoint, which forwards it or holds it until a leader is known;
// only answers that say to retry, and a round of endpoints none of which
// answered, cost a backoff. Non-2xx answers come back as *APIError.
func (c *Client) do(ctx context.Context, r *request) (*response, error) {
	var last error
	var unanswered string // the node of the last attempt, if it did not answer
	pauses, skipped := 0, 0
	for attempt := 1; ; attempt++ {
		base := c.target(ctx, unanswered)
		sent := time.Now()
		if attempt == 1 {
			r.firstSent = sent
		} else {
			r.retried = true
		}
		resp, err := c.send(ctx, base, r)
		if err == nil {
			c.follow(base, resp.header.Get(wire.HeaderLeader))
		}
		if err == nil && !resp.retryable() {
			r.sent = sent
			if resp.status/100 != 2 {
				return resp, answerError(base, resp)
			}
			return resp, nil
		}
		unanswered = ""
		if err == nil {
			// A forwarding node answers no_leader also when the leader
			// vanished mid-request, so any 5xx may hide a landed write.
			last = newAPIError(resp.status, resp.body)
			r.uncertain = true
		} else {
			if ctx.Err() != nil {
				return nil, ctxErr(ctx, r, last)
			}
			last = fmt.Errorf("%w: %w", ErrUnavailable, err)
			if !isDialError(err) {
				r.uncertain = true
			}
			unanswered = base
		}
		c.forget(base)
		if !r.untilDone && attempt >= c.retry.Attempts {
			return nil, fmt.Errorf("%s %s: %d attempts: %w", r.method, r.path, attempt, last)
		}
		c.log.Debug("fencer request failed; retrying", "method", r.method, "path", r.path, "endpoint", base, "attempt", attempt, "err", last)
		if unanswered != "" && skipped < len(c.endpoints)-1 {
			skipped++
			continue // no pause: another node answers now
		}
		skipped = 0
		pauses++
		if err := sleep(ctx, c.retry.backoff(pauses)); err != nil {
			return nil, ctxErr(ctx, r, last)
		}
	}
}

func ctxErr(ctx context.Context, r *request, last error) error {
	if last == nil {
		return fmt.Errorf("%s %s: %w", r.method, r.path, context.Cause(ctx))
	}
	return fmt.Errorf("%s %s: %w (last error: %w)", r.method, r.path, context.Cause(ctx), last)
}

// send performs one attempt against base.
func (c *Client) send(ctx context.Context, base string, r *request) (*response, error) {
	timeout := c.timeout
	if r.attemptTimeout > 0 {
		timeout = r.attemptTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout+r.extra)
	defer cancel()
	u := base + r.path
	if len(r.query) > 0 {
		u += "?" + r.query.Encode()
	}
	var body io.Reader
	if r.body != nil {
		body = bytes.NewReader(r.body)
	}
	req, err := http.NewRequestWithContext(ctx, r.method, u, body)
	if err != nil {
		return nil, err
	}
	for k, v := range r.header {
		req.Header[k] = v
	}
	if c.authorization != "" {
		req.Header.Set("Authorization", c.authorization)
	}
	var reused atomic.Bool
	req = req.WithContext(httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{
		GotConn: func(info httptrace.GotConnInfo) { reused.Store(info.Reused) },
	}))
	resp, err := c.hc.Do(req)
	if err != nil {
		if !reused.Load() && closedWithoutReply(err) {
			return nil, fmt.Errorf("%s closed the connection without an HTTP reply: this looks like a Raft port, not fencer's HTTP API (%w)", base, err)
		}
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, wire.MaxBodyBytes+1))
	if err != nil {
		return nil, err
	}
	return &response{status: resp.StatusCode, header: resp.Header, body: b}, nil
}

// closedWithoutReply reports whether a request failed because the server
// closed the connection without answering. An HTTP server answers even a
// request it cannot parse; hashicorp/raft's transport reads the first byte as
// an RPC type ('P' of POST is 80), finds none, and hangs up. A connection
// reused from the pool is different: the server may have closed it while
// idle, so only a fresh connection counts.
func closedWithoutReply(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET)
}

// answerError turns a non-2xx answer into an error: an *APIError, which a
// 404 without fencer's error body also wraps in ErrNotFencer, since every
// route of a fencer node, and its answer for unknown routes, carries one.
func answerError(base string, resp *response) error {
	e := newAPIError(resp.status, resp.body)
	if e.Code == "" && resp.status == http.StatusNotFound {
		return fmt.Errorf("%s is %w: it answered %w, without fencer's JSON error body", base, ErrNotFencer, e)
	}
	return e
}

// isDialError reports whether err happened before anything was sent.
func isDialError(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}

// target returns the base URL to send to: the cached leader, a freshly
// discovered one, or the next endpoint. After an attempt that did not
// reach its node (unanswered), it returns another endpoint without asking
// who leads: the members' own view may still name a leader that is gone,
// and any member forwards.
func (c *Client) target(ctx context.Context, unanswered string) string {
	c.mu.Lock()
	leader := c.leader
	c.mu.Unlock()
	if leader != "" && leader != unanswered {
		return leader
	}
	if unanswered == "" {
		if leader = c.discover(ctx); leader != "" {
			return leader
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for range c.endpoints {
		if ep := c.endpoints[c.next%len(c.endpoints)]; ep != unanswered {
			return ep
		}
		c.next++
	}
	return c.endpoints[c.next%len(c.endpoints)]
}

// follow caches the leader a forwarding member named (wire.HeaderLeader) in
// an answer from base, so that the next request goes to it directly.
func (c *Client) follow(base, leaderAddr string) {
	if leaderAddr == "" {
		return
	}
	u, err := url.Parse(base)
	if err != nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.leader = u.Scheme + "://" + leaderAddr
}

// discover asks the endpoints, in turn, who leads, and caches the answer.
func (c *Client) discover(ctx context.Context) string {
	c.discoverMu.Lock()
	defer c.discoverMu.Unlock()
	c.mu.Lock()
	leader, start := c.leader, c.next
	c.mu.Unlock()
	if leader != "" {
		return leader // found while we waited
	}
	for i := range c.endpoints {
		ep := c.endpoints[(start+i)%len(c.endpoints)]
		st, err := c.clusterStatus(ctx, ep)
		if err != nil {
			c.log.Debug("fencer leader discovery failed", "endpoint", ep, "err", err)
			continue
		}
		for _, m := range st.Members {
			if m.ID == st.Leader && st.Leader != "" && m.HTTPAddr != "" {
				u, _ := url.Parse(ep)
				leader = u.Scheme + "://" + m.HTTPAddr
				c.mu.Lock()
				c.leader, c.next = leader, start+i
				c.mu.Unlock()
				return leader
			}
		}
	}
	return ""
}

func (c *Client) clusterStatus(ctx context.Context, base string) (wire.ClusterStatus, error) {
	var st wire.ClusterStatus
	resp, err := c.send(ctx, base, &request{method: http.MethodGet, path: "/v1/cluster", attemptTimeout: min(c.timeout, 2*time.Second)})
	if err != nil {
		return st, err
	}
	if resp.status != http.StatusOK {
		return st, answerError(base, resp)
	}
	return st, json.Unmarshal(resp.body, &st)
}

// forget drops base as the leader after it failed, and moves on to the next
// endpoint.
func (c *Client) forget(base string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.leader == base {
		c.leader = ""
	}
	c.next++
}

// Leader returns the base URL of the cached leader, "" when none is known.
func (c *Client) Leader() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.leader
}

// backoff returns the pause before retry n (n >= 1): exponential, capped,
// with "equal jitter" so that clients do not retry in lockstep.
func (r Retry) backoff(n int) time.Duration {
	d := r.MinBackoff << min(n-1, 20)
	if d <= 0 || d > r.MaxBackoff {
		d = r.MaxBackoff
	}
	return d/2 + rand.N(d/2+1)
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// getJSON and postJSON are do for JSON requests and answers.
func (c *Client) getJSON(ctx context.Context, path string, query url.Values, out any) error {
	resp, err := c.do(ctx, &request{method: http.MethodGet, path: path, query: query})
	if err != nil {
		return err
	}
	return decode(resp, out)
}

func (c *Client) postJSON(ctx context.Context, r *request, in, out any) error {
	b, err := json.Marshal(in)
	if err != nil {
		return err
	}
	r.method, r.body = http.MethodPost, b
	if r.header == nil {
		r.header = http.Header{}
	}
	r.header.Set("Content-Type", "application/json")
	resp, err := c.do(ctx, r)
	if err != nil {
		return err
	}
	return decode(resp, out)
}

func decode(resp *response, out any) error {
	if err := json.Unmarshal(resp.body, out); err != nil {
		return fmt.Errorf("decoding answer (HTTP %d): %w", resp.status, err)
	}
	return nil
}
