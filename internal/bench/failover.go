package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/fencer-io/fencer/api/client"
	"github.com/fencer-io/fencer/api/wire"
	"github.com/fencer-io/fencer/internal/bench/load"
)

// Failover is the workload of the failover benchmark: every client cycles
// its own lock (acquire, release) through the cluster's members while the
// leader is stopped. Two kinds of client take turns:
//
//   - go-client: fencer's Go client (api/client) given every member,
//     starting at member i mod n; it follows the leader, and its retries and
//     backoff are part of what is measured.
//   - http: a plain HTTP client pinned to member i mod n, as behind a load
//     balancer: it honours Retry-After on a 503 and moves to the next member
//     only when a connection fails. What it measures is the members'
//     forwarding.
//
// A cycle that fails part way moves its client on to a fresh lock name, so
// that a grant left behind never blocks the next cycle.
type Failover struct {
	Members []string // member HTTP addresses, host:port
	TTL     time.Duration
	Prefix  string
	// Log, when set, gets a line for every 503 a plain HTTP client waits
	// out, to tell where a client's pause came from.
	Log io.Writer
}

// NewFailover returns the workload over members with grants of ttl.
func NewFailover(members []string, ttl time.Duration) *Failover {
	return &Failover{Members: members, TTL: ttl, Prefix: "failover-" + randomHex(4)}
}

// Group names client i's kind.
func (f *Failover) Group(i int) string {
	if i%2 == 0 {
		return "go-client"
	}
	return "http"
}

// Client is the load.Client of the workload.
func (f *Failover) Client(_ context.Context, i int) (load.Op, func(), error) {
	first := (i / 2) % len(f.Members)
	gen := 0
	name := func() string { return f.Prefix + "-" + strconv.Itoa(i) + "-" + strconv.Itoa(gen) }
	if f.Group(i) == "go-client" {
		eps := append(append([]string(nil), f.Members[first:]...), f.Members[:first]...)
		c, err := client.New(eps)
		if err != nil {
			return nil, nil, err
		}
		op := func(ctx context.Context) error {
			l, err := c.Acquire(ctx, name(), client.TTL(f.TTL), client.NoKeepAlive(), client.Holder(f.Prefix))
			if err == nil {
				err = l.Release(ctx)
			}
			if err != nil {
				gen++
			}
			return err
		}
		return op, c.Close, nil
	}
	p := &pinned{members: f.Members, at: first, log: f.Log, hc: &http.Client{Transport: &http.Transport{
		DialContext:         (&net.Dialer{Timeout: 2 * time.Second}).DialContext,
		MaxIdleConnsPerHost: 4,
	}}}
	op := func(ctx context.Context) error {
		err := p.cycle(ctx, name(), f.TTL, f.Prefix)
		if err != nil {
			gen++
		}
		return err
	}
	return op, p.hc.CloseIdleConnections, nil
}

// pinned is the plain HTTP client: one member at a time.
type pinned struct {
	members []string
	at      int
	hc      *http.Client
	log     io.Writer
}

func (p *pinned) cycle(ctx context.Context, lock string, ttl time.Duration, holder string) error {
	var g wire.Grant
	err := p.post(ctx, "/v1/locks/"+url.PathEscape(lock)+"/acquire", wire.AcquireRequest{
		Holder: holder, TTLMillis: ttl.Milliseconds(), RequestID: randomHex(16),
	}, &g)
	if err != nil {
		return err
	}
	return p.post(ctx, "/v1/locks/"+url.PathEscape(lock)+"/release", wire.LeaseRequest{Lease: g.Lease, Token: g.Token}, nil)
}

// post sends one request until it is answered: a failed connection moves on
// to the next member at once, a 503 waits as long as Retry-After says, then
// asks the same member again. Both requests are safe to repeat: the acquire
// carries a request id, and a repeated release that finds the grant gone
// (410) means an earlier attempt released it.
func (p *pinned) post(ctx context.Context, path string, in, out any) error {
	release := strings.HasSuffix(path, "/release")
	body, err := json.Marshal(in)
	if err != nil {
		return err
	}
	for refused, sent := 0, 0; ; sent++ {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+p.members[p.at]+path, bytes.NewReader(body))
		if err != nil {
			return err
		}
		req.Header.Set("Content-Type", "application/json")
		resp, err := p.hc.Do(req)
		if err != nil {
			if ctx.Err() != nil {
				return err
			}
			p.at = (p.at + 1) % len(p.members)
			if refused++; refused%len(p.members) == 0 {
				// Every member refused: pause rather than spin.
				if err := pause(ctx, 50*time.Millisecond); err != nil {
					return err
				}
			}
			continue
		}
		b, err := io.ReadAll(io.LimitReader(resp.Body, wire.MaxBodyBytes))
		resp.Body.Close()
		switch {
		case err != nil:
			return err
		case resp.StatusCode == http.StatusOK:
			if out == nil {
				return nil
			}
			return json.Unmarshal(b, out)
		case resp.StatusCode == http.StatusGone && release && sent > 0:
			return nil
		case resp.StatusCode != http.StatusServiceUnavailable:
			return fmt.Errorf("POST %s: HTTP %d: %s", path, resp.StatusCode, bytes.TrimSpace(b))
		}
		wait := time.Second
		if s, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil && s >= 0 {
			wait = time.Duration(s) * time.Second
		}
		if p.log != nil {
			fmt.Fprintf(p.log, "%s %s via %s: 503, waiting %v: %s\n", time.Now().Format("15:04:05.000"), path, p.members[p.at], wait, bytes.TrimSpace(b))
		}
		if err := pause(ctx, wait); err != nil {
			return errors.Join(err, fmt.Errorf("POST %s: HTTP 503: %s", path, bytes.TrimSpace(b)))
		}
	}
}

func pause(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
