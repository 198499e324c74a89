package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"sync/atomic"

	"github.com/fencer-io/fencer/api/wire"
	"github.com/fencer-io/fencer/internal/bench/load"
)

// Scale holds many locks at once for the scale benchmark
// (internal/bench/scalebench): each with a lease of its own, or PerSession
// of them under each of a number of sessions. It keeps every grant's token
// and secret, so that it can renew what it holds afterwards, as a real
// client keeping them alive would.
//
// Session calls go to the leader as plain HTTP (the wire contract of
// api/wire/sessions.go), so the benchmark measures the server whatever the
// Go client's session support does on top.
type Scale struct {
	*Fencer
	// Leader is the leader's HTTP address (HOST:PORT); session calls are
	// sent there.
	Leader string
	// PerSession locks are held under each session; 0 gives every lock a
	// lease of its own.
	PerSession int

	locks    []heldGrant
	sessions []heldGrant
}

// heldGrant is what renewing a grant or a session takes: its token (a
// session's id) and secret. Names are derived from the index.
type heldGrant struct {
	token uint64
	lease string
}

// Held is the number of locks acquired so far.
func (s *Scale) Held() int { return len(s.locks) }

// Sessions is the number of sessions created so far.
func (s *Scale) Sessions() int { return len(s.sessions) }

func (s *Scale) lockName(i int) string { return s.Prefix + "-s-" + strconv.Itoa(i) }

// holder of lock i: one per session, or one per 10,000 locks, which keeps
// each holder far below the servers' --max-locks-per-holder (100,000).
func (s *Scale) holder(i int) string {
	if s.PerSession > 0 {
		return s.Prefix + "-holder-" + strconv.Itoa(i/s.PerSession)
	}
	return s.Prefix + "-holder-" + strconv.Itoa(i/10_000)
}

// HoldTo acquires locks until n are held: first the sessions they need,
// then the locks, with cfg's clients (cfg.Ops is set here). It returns the
// load result of the locks' acquiring; a lock whose acquire failed is
// counted in its Errors and not held.
func (s *Scale) HoldTo(ctx context.Context, cfg load.Config, n int) (load.Result, error) {
	if s.PerSession > 0 {
		need := (n + s.PerSession - 1) / s.PerSession
		if err := s.createSessions(ctx, cfg, need); err != nil {
			return load.Result{}, err
		}
	}
	from := len(s.locks)
	if n <= from {
		return load.Result{}, nil
	}
	got := make([]heldGrant, n-from)
	var next atomic.Int64
	cfg.Ops = int64(n - from)
	res, err := load.Run(ctx, cfg, func(context.Context, int) (load.Op, func(), error) {
		return func(ctx context.Context) error {
			k := int(next.Add(1) - 1)
			if k >= len(got) {
				return nil
			}
			g, err := s.acquire(ctx, from+k)
			if err != nil {
				return err
			}
			got[k] = g
			return nil
		}, nil, nil
	})
	if err != nil {
		return res, err
	}
	// Keep only what was granted, in order: a failed acquire leaves a hole.
	for _, g := range got {
		if g.token != 0 {
			s.locks = append(s.locks, g)
		}
	}
	return res, nil
}

// acquire takes lock i, with a lease of its own or under its session.
func (s *Scale) acquire(ctx context.Context, i int) (heldGrant, error) {
	if s.PerSession == 0 {
		g, err := s.acquireAs(ctx, s.holder(i), s.lockName(i), 0)
		return heldGrant{g.Token, g.Lease}, err
	}
	sess := s.sessions[i/s.PerSession]
	// No ttl_ms: a grant under a session has none of its own.
	body := struct {
		Holder       string `json:"holder"`
		Session      uint64 `json:"session"`
		SessionLease string `json:"session_lease"`
		RequestID    string `json:"request_id"`
	}{s.holder(i), sess.token, sess.lease, randomHex(16)}
	var g wire.Grant
	err := s.post(ctx, "/v1/locks/"+url.PathEscape(s.lockName(i))+"/acquire", body, &g)
	if err == nil && (g.Token == 0 || g.Session != sess.token) {
		err = fmt.Errorf("acquire under session %d: answered token %d, session %d", sess.token, g.Token, g.Session)
	}
	return heldGrant{g.Token, g.Lease}, err
}

// createSessions creates sessions until n exist, with the TTL of the
// benchmark's grants.
func (s *Scale) createSessions(ctx context.Context, cfg load.Config, n int) error {
	from := len(s.sessions)
	if n <= from {
		return nil
	}
	got := make([]heldGrant, n-from)
	var next atomic.Int64
	cfg.Ops = int64(n - from)
	res, err := load.Run(ctx, cfg, func(context.Context, int) (load.Op, func(), error) {
		return func(ctx context.Context) error {
			k := int(next.Add(1) - 1)
			if k >= len(got) {
				return nil
			}
			var out wire.Session
			req := wire.SessionRequest{Holder: s.holder((from + k) * s.PerSession), TTLMillis: s.TTL.Milliseconds(), RequestID: randomHex(16)}
			if err := s.post(ctx, "/v1/sessions", req, &out); err != nil {
				var pe *postError
				if errors.As(err, &pe) && (pe.Status == http.StatusNotFound || pe.Status == http.StatusMethodNotAllowed) {
					return fmt.Errorf("%w (a build without the sessions API of issue 27?)", err)
				}
				return err
			}
			got[k] = heldGrant{out.Session, out.Lease}
			return nil
		}, nil, nil
	})
	if err != nil {
		return err
	}
	if res.Errors > 0 {
		// Every lock of a missing session would fail: stop here instead.
		return fmt.Errorf("creating sessions: %d of %d failed, first: %s", res.Errors, n-from, res.FirstError)
	}
	s.sessions = append(s.sessions, got...)
	return nil
}

// Renewals is the load.Client that renews what is held, round robin: each
// session's lease, or each lock's own.
func (s *Scale) Renewals() load.Client {
	var next atomic.Int64
	return func(context.Context, int) (load.Op, func(), error) {
		return func(ctx context.Context) error {
			k := int(next.Add(1) - 1)
			if s.PerSession > 0 {
				sess := s.sessions[k%len(s.sessions)]
				var out wire.SessionRenewResponse
				return s.post(ctx, "/v1/sessions/"+strconv.FormatUint(sess.token, 10)+"/renew", wire.SessionLeaseRequest{Lease: sess.lease}, &out)
			}
			i := k % len(s.locks)
			_, err := s.Client.RenewRaw(ctx, s.lockName(i), s.locks[i].token, s.locks[i].lease)
			return err
		}, nil, nil
	}
}

// post sends body as JSON to the leader and decodes a 2xx answer into
// out; anything else is an error with the API's code. It does not retry:
// a benchmark that lost its leader is reported, not hidden.
func (s *Scale) post(ctx context.Context, path string, body, out any) error {
	b, err := json.Marshal(body)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+s.Leader+path, bytes.NewReader(b))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := s.HTTP.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode/100 != 2 {
		pe := &postError{Path: path, Status: resp.StatusCode, Body: data}
		if json.Unmarshal(data, &pe.API) != nil || pe.API.Code == "" {
			pe.API = nil
		}
		return pe
	}
	return json.Unmarshal(data, out)
}

// postError is an answer other than 2xx, with the API's error when the
// body was one.
type postError struct {
	Path   string
	Status int
	API    *wire.Error
	Body   []byte
}

func (e *postError) Error() string {
	if e.API != nil {
		return fmt.Sprintf("POST %s: %d %s", e.Path, e.Status, e.API.Error())
	}
	return fmt.Sprintf("POST %s: %d %.200s", e.Path, e.Status, e.Body)
}
