// Package bench holds fencer's benchmark workloads, driven by package load,
// and (in its tests) the raw-Raft and scale benchmarks that put fencer's
// numbers in context. The etcd side of the comparison lives in its own Go
// module (scripts/etcdbench) so that fencer never depends on etcd.
package bench

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"time"

	"github.com/fencer-io/fencer/api/client"
	"github.com/fencer-io/fencer/api/wire"
	"github.com/fencer-io/fencer/internal/bench/load"
)

// Workloads are the workloads Fencer.Workload knows, in documentation order.
var Workloads = []string{"uncontended", "contended", "renew", "fenced-write", "hold"}

// Fencer runs workloads against a fencer cluster. Every request goes to the
// leader over kept-alive connections, through the client's raw calls
// (AcquireRaw, RenewRaw, ReleaseRaw; Acquire would start a lease watcher
// per grant, which measures the client rather than the cluster), retried as
// the client retries: an acquire with one request id across its attempts,
// so that a lost answer gets its grant back instead of finding the lock
// held by itself.
type Fencer struct {
	Client *client.Client
	HTTP   *http.Client // the client's HTTP client
	// TTL of every grant; Wait is how long a contended acquire queues.
	TTL  time.Duration
	Wait time.Duration
	// Prefix starts every lock and key name, so that runs never collide
	// with each other's leftovers.
	Prefix string
}

// Conn is how the benchmark's clients connect: TLS (nil for plain TCP) and
// whether they speak HTTP/2.
type Conn struct {
	TLS   *tls.Config
	HTTP2 bool
}

// NewFencer builds a client for endpoints with one kept-alive connection
// per benchmark client, and finds the leader. timeout bounds each request
// attempt (a contended acquire's wait comes on top).
// With conn.HTTP2 every client's requests share one HTTP/2 connection per
// node (h2c over plain TCP) instead of a connection each.
func NewFencer(ctx context.Context, endpoints []string, clients int, ttl, wait, timeout time.Duration, conn Conn, opts ...client.Option) (*Fencer, error) {
	std := &http.Transport{
		MaxIdleConns:        clients + 16,
		MaxIdleConnsPerHost: clients + 16,
		IdleConnTimeout:     90 * time.Second,
		TLSClientConfig:     conn.TLS,
		Protocols:           client.Protocols(conn.HTTP2),
	}
	hc := &http.Client{Transport: std}
	if !conn.HTTP2 && os.Getenv("FENCER_CLIENT_NETHTTP") == "" {
		// The client's default for HTTP/1.1 (client.NewHTTP1Transport).
		hc.Transport = client.NewHTTP1Transport(std)
	}
	opts = append(opts, client.WithHTTPClient(hc), client.WithTimeout(wait+timeout))
	c, err := client.New(endpoints, opts...)
	if err != nil {
		return nil, err
	}
	f := &Fencer{Client: c, HTTP: hc, TTL: ttl, Wait: wait, Prefix: "bench-" + randomHex(4)}
	// A cluster that was just started may not have elected a leader yet.
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for {
		_, err := f.leader(ctx)
		if err == nil {
			return f, nil
		}
		var api *client.APIError
		if errors.As(err, &api) && (api.Status == http.StatusUnauthorized || api.Status == http.StatusForbidden) {
			return nil, err // waiting will not make the cluster accept this client
		}
		select {
		case <-ctx.Done():
			return nil, err
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// Workload returns the load.Client of the named workload:
//
//   - uncontended: each client its own lock; one op is acquire + release.
//   - contended: every client on one lock, queueing with Wait; one op is
//     acquire + release, so ops/s is handoffs/s.
//   - renew: each client holds a lease; one op is a renewal.
//   - fenced-write: each client its own lock and key; one op is acquire,
//     a fenced PUT that also names the lock, and release, written as a
//     fenced writer does (fencedWrite): an op counts when the write is
//     known to have landed (answered, or found in place after a lost
//     answer) and the lock was released; a write refused because a newer
//     token wrote or the lock is no longer ours counts as an error.
//   - hold: one op acquires a fresh lock and keeps it until its TTL ends
//     (for the scale benchmark: run it with a long TTL and Config.Ops);
//     each client is its own holder, as the servers limit the locks one
//     holder may keep (--max-locks-per-holder).
func (f *Fencer) Workload(name string) (load.Client, error) {
	switch name {
	case "uncontended":
		return func(_ context.Context, i int) (load.Op, func(), error) {
			lock := f.name("u", i)
			return func(ctx context.Context) error {
				g, err := f.acquire(ctx, lock, 0)
				if err != nil {
					return err
				}
				return f.release(ctx, g)
			}, nil, nil
		}, nil
	case "contended":
		lock := f.name("c", 0)
		return func(_ context.Context, _ int) (load.Op, func(), error) {
			return func(ctx context.Context) error {
				g, err := f.acquire(ctx, lock, f.Wait)
				if err != nil {
					return err
				}
				return f.release(ctx, g)
			}, nil, nil
		}, nil
	case "renew":
		return func(ctx context.Context, i int) (load.Op, func(), error) {
			g, err := f.acquire(ctx, f.name("r", i), 0)
			if err != nil {
				return nil, nil, err
			}
			op := func(ctx context.Context) error {
				_, err := f.Client.RenewRaw(ctx, g.Lock, g.Token, g.Lease)
				return err
			}
			return op, func() { f.release(context.Background(), g) }, nil
		}, nil
	case "fenced-write":
		return func(_ context.Context, i int) (load.Op, func(), error) {
			lock, key := f.name("f", i), f.name("k", i)
			value := bytes.Repeat([]byte("v"), 64)
			return func(ctx context.Context) error {
				g, err := f.acquire(ctx, lock, 0)
				if err != nil {
					return err
				}
				werr := f.fencedWrite(ctx, key, value, g.Token, lock)
				return errors.Join(werr, f.release(ctx, g))
			}, nil, nil
		}, nil
	case "hold":
		return func(_ context.Context, i int) (load.Op, func(), error) {
			k := 0
			holder := f.name("holder", i)
			return func(ctx context.Context) error {
				k++
				_, err := f.acquireAs(ctx, holder, f.name("h", i)+"-"+strconv.Itoa(k), 0)
				return err
			}, nil, nil
		}, nil
	}
	return nil, fmt.Errorf("workload %q: want one of %v", name, Workloads)
}

func (f *Fencer) name(kind string, i int) string {
	return f.Prefix + "-" + kind + "-" + strconv.Itoa(i)
}

// acquire asks for lock as the benchmark's holder. The client retries it
// with one request id, so an answer lost on the way comes back as the
// same grant (Existing) on the next attempt.
func (f *Fencer) acquire(ctx context.Context, lock string, wait time.Duration) (wire.Grant, error) {
	return f.acquireAs(ctx, f.Prefix, lock, wait)
}

// acquireAs is acquire by a named holder.
func (f *Fencer) acquireAs(ctx context.Context, holder, lock string, wait time.Duration) (wire.Grant, error) {
	return f.Client.AcquireRaw(ctx, lock, wire.AcquireRequest{
		Holder:    holder,
		TTLMillis: f.TTL.Milliseconds(),
		WaitMs:    wait.Milliseconds(),
	})
}

// fencedWrite writes value under key with token as a fenced writer does.
// PutFenced retries what is safe to retry; when an attempt's answer was
// lost and the retry was refused (ErrOutcomeUnknown: the lost attempt may
// have written), the writer reads the key: its own token there means the
// write landed, a lower one or none that it did not, and it is sent again. Any other
// refusal, a newer token's write (ErrStaleToken) or the lock no longer
// held by token, means the writer must stop: it is the op's error.
func (f *Fencer) fencedWrite(ctx context.Context, key string, value []byte, token uint64, lock string) error {
	for {
		err := f.Client.PutFenced(ctx, key, value, token, client.WithLock(lock))
		if !errors.Is(err, client.ErrOutcomeUnknown) {
			return err
		}
		_, last, rerr := f.Client.Get(ctx, key)
		switch {
		case errors.Is(rerr, client.ErrNotFound):
			continue // never written: the lost attempt did not land
		case rerr != nil:
			return errors.Join(err, rerr)
		case last == token:
			return nil // the attempt whose answer was lost wrote it
		case last > token:
			return err // a newer holder wrote: stop
		}
	}
}

func (f *Fencer) release(ctx context.Context, g wire.Grant) error {
	_, err := f.Client.ReleaseRaw(ctx, g.Lock, g.Token, g.Lease)
	return err
}

// leader asks the cluster for its leader; the client caches the answer.
func (f *Fencer) leader(ctx context.Context) (string, error) {
	if _, err := f.Client.Cluster(ctx); err != nil {
		return "", fmt.Errorf("finding the leader: %w", err)
	}
	if l := f.Client.Leader(); l != "" {
		return l, nil
	}
	return "", errors.New("finding the leader: the cluster reports none")
}

func randomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}
