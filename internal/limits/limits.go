// Package limits holds fencer's request limits that sit in front of the API:
// per-client rate limiting, a request body cap and the HTTP server's
// timeouts. Each has a default chosen for a lock service (many small
// requests, some held open by wait_ms), and a zero field means the default.
//
// Rate limiting keys each request by its client: the ACL principal when
// acl.Middleware ran before it (the principal survives forwarding, since the
// leader re-authenticates the forwarded Authorization header), else the
// remote IP (IPv6 by /64). X-Forwarded-For is never trusted. A request that a
// follower forwards arrives at the leader from the follower's address, so
// without ACLs every client of a follower shares that follower's bucket on
// the leader, unless Exempt lets forwarded requests through (see
// ForwardedByNode, which needs node certificates to tell a real node from a
// client that sets the header).
package limits

import (
	"fmt"
	"math"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/go-chi/httprate"

	"github.com/fencer-io/fencer/api/wire"
	"github.com/fencer-io/fencer/internal/acl"
	"github.com/fencer-io/fencer/internal/tlsutil"
)

// Defaults of RateConfig: 100 requests per second per client is far above
// what a well-behaved lock holder needs (a renewal every TTL/3) and low
// enough that one runaway client cannot monopolise the leader.
const (
	DefaultRateRequests = 100
	DefaultRateWindow   = time.Second
)

// RateConfig configures RateLimit. Zero values mean the defaults.
type RateConfig struct {
	// Requests allowed per client per Window; negative disables limiting.
	Requests int
	// Window is the sliding window; at least a second.
	Window time.Duration
	// Key names a request's client; nil means ClientKey.
	Key func(*http.Request) string
	// Exempt requests are never counted; the health probes always are.
	Exempt func(*http.Request) bool
}

// Validate fills in defaults and checks the values.
func (c *RateConfig) Validate() error {
	if c.Requests == 0 {
		c.Requests = DefaultRateRequests
	}
	if c.Window == 0 {
		c.Window = DefaultRateWindow
	}
	if c.Window < time.Second {
		return fmt.Errorf("rate limit window %v: want at least 1s", c.Window)
	}
	if c.Key == nil {
		c.Key = ClientKey
	}
	return nil
}

// ClientKey is the ACL principal's name if the request was authenticated,
// else the remote IP.
func ClientKey(r *http.Request) string {
	if p, ok := acl.PrincipalFrom(r.Context()); ok {
		return "principal:" + p.Name
	}
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	return "ip:" + httprate.CanonicalizeIP(host)
}

// ForwardedByNode reports whether the request was forwarded by another node:
// it carries the forwarding header and came over TLS with a verified node
// certificate. Without TLS a client could set the header itself, so it is
// never trusted then.
func ForwardedByNode(r *http.Request) bool {
	if r.Header.Get(wire.HeaderForwardedBy) == "" || r.TLS == nil || len(r.TLS.VerifiedChains) == 0 {
		return false
	}
	return tlsutil.IsNodeCert(r.TLS.VerifiedChains[0][0])
}

// RateLimit refuses a client's requests beyond cfg.Requests per cfg.Window
// with 429 rate_limited and Retry-After. A refused request reaches nothing
// behind it, so it changes no state.
func RateLimit(cfg RateConfig) (func(http.Handler) http.Handler, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Requests < 0 {
		return func(next http.Handler) http.Handler { return next }, nil
	}
	retryAfter := strconv.Itoa(int(math.Ceil(cfg.Window.Seconds())))
	limiter := httprate.NewRateLimiter(cfg.Requests, cfg.Window,
		httprate.WithKeyFuncs(func(r *http.Request) (string, error) { return cfg.Key(r), nil }),
		httprate.WithLimitHandler(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Retry-After", retryAfter)
			wire.WriteError(w, http.StatusTooManyRequests, &wire.Error{Code: wire.CodeRateLimited,
				Message: fmt.Sprintf("more than %d requests in %v from this client; retry after %ss", cfg.Requests, cfg.Window, retryAfter)})
		}),
		httprate.WithErrorHandler(func(w http.ResponseWriter, r *http.Request, err error) {
			wire.WriteError(w, http.StatusInternalServerError, &wire.Error{Code: wire.CodeInternal, Message: "rate limiter: " + err.Error()})
		}),
	)
	return func(next http.Handler) http.Handler {
		limited := limiter.Handler(next)
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/healthz" || r.URL.Path == "/readyz" || cfg.Exempt != nil && cfg.Exempt(r) {
				next.ServeHTTP(w, r)
				return
			}
			limited.ServeHTTP(w, r)
		})
	}, nil
}
