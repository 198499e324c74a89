package client

import (
	"crypto/tls"
	"errors"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/fencer-io/fencer/api/client/internal/transport"
	"github.com/fencer-io/fencer/api/wire"
)

// Client talks to a fencer cluster. It is safe for concurrent use.
type Client struct {
	tr *transport.Transport // endpoints, the leader, retries

	// Set by the options; New applies the defaults.
	hc      *http.Client
	timeout time.Duration
	retry   Retry
	// maxAnswer bounds the body of an answer read in full.
	maxAnswer int64
	log       *slog.Logger
	tls       *tls.Config
	http2     bool
	// authorization is the Authorization header sent on every request; ""
	// for none.
	authorization string
}

// Retry bounds the client's retries of a request. Zero fields mean the
// defaults. Every retry is also bounded by the caller's context.
type Retry struct {
	// Attempts is the most attempts per request (default 8; 1 disables
	// retries).
	Attempts int
	// MinBackoff is the pause before the first retry (default 50ms); it
	// doubles per retry up to MaxBackoff (default 1s), with jitter.
	MinBackoff time.Duration
	MaxBackoff time.Duration
}

// Option configures a Client.
type Option func(*Client)

// WithHTTPClient makes the client send requests with hc. Its Timeout should
// be zero: per-request time limits come from WithTimeout and the context.
// The client uses a copy of hc that follows no redirect (its CheckRedirect
// is replaced): a fencer node never redirects, and a fencing client must
// not be sent elsewhere silently.
func WithHTTPClient(hc *http.Client) Option { return func(c *Client) { c.hc = hc } }

// WithMaxAnswerBytes bounds the body of an answer the client reads in full
// (default DefaultMaxAnswerBytes); a longer one is ErrBadAnswer, refused
// once that many bytes have been read. Streams (Watch, snapshots) are not
// bounded by it.
func WithMaxAnswerBytes(n int64) Option { return func(c *Client) { c.maxAnswer = n } }

// WithTimeout bounds each attempt of a request (default 10s). An acquire's
// attempt also gets its wait time on top.
func WithTimeout(d time.Duration) Option { return func(c *Client) { c.timeout = d } }

// WithRetry sets the retry policy.
func WithRetry(r Retry) Option { return func(c *Client) { c.retry = r } }

// WithTLS talks https with this configuration (the cluster CA, and a client
// certificate if the cluster asks for one); bare host:port endpoints then
// mean https.
func WithTLS(cfg *tls.Config) Option {
	return func(c *Client) { c.tls = cfg }
}

// WithHTTP2 makes the client speak HTTP/2 to the nodes: negotiated over
// TLS, and over plain TCP with prior knowledge (h2c), so that every request
// to a node shares one connection. Every node serves both HTTP/1.1 and
// HTTP/2; the default is HTTP/1.1 (docs/benchmarks.md, "HTTP/2"). It has no
// effect with WithHTTPClient, whose transport says what it speaks.
func WithHTTP2() Option { return func(c *Client) { c.http2 = true } }

// Protocols is the http.Transport.Protocols of a client's own transport,
// for callers that pass WithHTTPClient: nil (HTTP/1.1) or, with http2,
// HTTP/2 alone (h2c over plain TCP), as WithHTTP2 makes it.
func Protocols(http2 bool) *http.Protocols { return transport.Protocols(http2) }

// NewHTTP1Transport returns the round tripper a client uses by default for
// HTTP/1.1 (plain and TLS): the calling goroutine writes each request on a
// kept-alive connection and reads its answer itself, with none of
// net/http's per-connection goroutines. It takes std's TLS configuration
// and MaxIdleConnsPerHost, and leaves to std what it does not do (proxies
// from the environment, other schemes). It is for callers that pass
// WithHTTPClient and want the default's speed; std alone is net/http's.
func NewHTTP1Transport(std *http.Transport) http.RoundTripper { return transport.NewDirect(std) }

// WithBearerToken sends "Authorization: Bearer token" on every request, for
// clusters that run with an ACL file.
func WithBearerToken(token string) Option {
	return func(c *Client) {
		c.authorization = ""
		if token != "" {
			c.authorization = "Bearer " + token
		}
	}
}

// WithNodeCredential makes the client speak as member id of the cluster,
// presenting the cluster secret (wire.AuthSchemeNode) on every request. It
// is for fencer's own nodes, in a cluster with access control but no TLS;
// members refuse it for anything but what they ask of each other. Since
// members sign their requests with keys of their own (wire.AuthSchemeMember,
// cluster/internal/peers), the secret speaks only for an id with no member
// key recorded: a node about to join, or a member on an older build; for a
// member with a key it is 401 keyed_member. It replaces a bearer token, and
// a bearer token replaces it: the last option given wins.
func WithNodeCredential(id, secret string) Option {
	return func(c *Client) { c.authorization = wire.NodeAuthorization(id, secret) }
}

// WithLogger makes the client log retries (debug) and lost leases (warn).
func WithLogger(l *slog.Logger) Option { return func(c *Client) { c.log = l } }

// DefaultTimeout bounds each attempt unless WithTimeout says otherwise.
const DefaultTimeout = 10 * time.Second

// DefaultMaxAnswerBytes bounds an answer's body unless WithMaxAnswerBytes
// says otherwise: 4 MiB, a lock list of some ten thousand locks.
const DefaultMaxAnswerBytes = 4 << 20

// New returns a client for the cluster reachable at endpoints, each
// "host:port" or an http(s) URL. Any member will do: the client asks it for
// the leader and then talks to the leader directly.
func New(endpoints []string, opts ...Option) (*Client, error) {
	c := &Client{}
	for _, o := range opts {
		o(c)
	}
	var bases []string
	for _, ep := range endpoints {
		ep = strings.TrimSpace(ep)
		if ep == "" {
			continue
		}
		base, err := transport.BaseURL(ep, c.tls != nil)
		if err != nil {
			return nil, err
		}
		bases = append(bases, base)
	}
	if len(bases) == 0 {
		return nil, errors.New("no endpoints: want at least one host:port or URL of a fencer node")
	}
	if c.hc == nil {
		c.hc = transport.NewHTTPClient(c.tls, c.http2)
	}
	hc := *c.hc
	hc.CheckRedirect = noRedirect
	c.hc = &hc
	if c.maxAnswer <= 0 {
		c.maxAnswer = DefaultMaxAnswerBytes
	}
	if c.timeout <= 0 {
		c.timeout = DefaultTimeout
	}
	if c.log == nil {
		c.log = slog.New(slog.DiscardHandler)
	}
	c.retry = c.retry.withDefaults()
	c.tr = transport.New(transport.Config{
		Endpoints:     bases,
		HTTP:          c.hc,
		Timeout:       c.timeout,
		Retry:         transport.Retry(c.retry),
		Log:           c.log,
		Authorization: c.authorization,
		AnswerError:   answerError,
		Unavailable:   ErrUnavailable,

		BadAnswer:      ErrBadAnswer,
		MaxAnswerBytes: c.maxAnswer,
	})
	return c, nil
}

// noRedirect hands a redirect back as the answer (which answerError turns
// into ErrBadAnswer) instead of following it.
func noRedirect(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }

func (r Retry) withDefaults() Retry {
	if r.Attempts <= 0 {
		r.Attempts = 8
	}
	if r.MinBackoff <= 0 {
		r.MinBackoff = 50 * time.Millisecond
	}
	if r.MaxBackoff <= 0 {
		r.MaxBackoff = time.Second
	}
	r.MaxBackoff = max(r.MaxBackoff, r.MinBackoff)
	return r
}

// Endpoints returns the configured endpoints as base URLs.
func (c *Client) Endpoints() []string { return append([]string(nil), c.tr.Endpoints()...) }

// Leader returns the base URL of the cached leader, "" when none is known.
func (c *Client) Leader() string { return c.tr.Leader() }

// Close closes idle connections. Leases keep renewing until released.
func (c *Client) Close() { c.tr.CloseIdleConnections() }
