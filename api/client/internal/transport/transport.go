// Package transport carries the Go client's requests to a fencer cluster: it
// keeps the endpoints, finds and follows the leader, retries what is safe to
// retry, and encodes requests and answers; the client's errors come from the
// functions it is configured with.
package transport

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/fencer-io/fencer/api/wire"
)

// Config is what a Transport needs; every field is required.
type Config struct {
	Endpoints []string // base URLs: scheme://host:port (BaseURL)
	HTTP      *http.Client
	Timeout   time.Duration // bounds each attempt
	Retry     Retry
	Log       *slog.Logger
	// Authorization is the Authorization header sent on every request; ""
	// for none.
	Authorization string
	// AnswerError makes the error of a non-2xx answer from base.
	AnswerError func(base string, status int, body []byte) error
	// Unavailable is wrapped around the error of an attempt that got no
	// answer.
	Unavailable error
	// BadAnswer is wrapped around the error of an answer that is not one:
	// a body over MaxAnswerBytes, or one that does not decode.
	BadAnswer error
	// MaxAnswerBytes bounds the body of an answer that Do reads.
	MaxAnswerBytes int64
}

// Retry bounds the retries of a request: the client's Retry, with its
// defaults applied.
type Retry struct {
	Attempts   int
	MinBackoff time.Duration
	MaxBackoff time.Duration
}

// Transport sends requests to the leader of one cluster. It is safe for
// concurrent use.
type Transport struct {
	cfg Config

	discoverMu sync.Mutex // one leader discovery at a time
	mu         sync.Mutex
	next       int    // endpoint to try when no leader is known
	leader     string // base URL of the leader; "" when unknown
}

// New returns a Transport over cfg.
func New(cfg Config) *Transport { return &Transport{cfg: cfg} }

// BaseURL turns an endpoint, "host:port" (https when tls) or an http(s)
// URL, into the base URL requests are sent to.
func BaseURL(ep string, tls bool) (string, error) {
	if !strings.Contains(ep, "://") {
		if tls {
			ep = "https://" + ep
		} else {
			ep = "http://" + ep
		}
	}
	u, err := url.Parse(ep)
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		return "", fmt.Errorf("endpoint %q: want host:port or an http(s) URL", ep)
	}
	return u.Scheme + "://" + u.Host, nil
}

// NewHTTPClient keeps connections alive: renewals every few seconds should
// not pay for a TCP handshake each. A node that does not accept a
// connection within a second is taken for gone (a crashed host answers
// nothing): the request moves on to another member at once.
//
// With http2 the client speaks HTTP/2 only: over TLS negotiated as usual,
// over plain TCP with prior knowledge (h2c), every request to a node
// multiplexed on one connection.
func NewHTTPClient(cfg *tls.Config, http2 bool) *http.Client {
	std := &http.Transport{
		Proxy:               http.ProxyFromEnvironment,
		DialContext:         (&net.Dialer{Timeout: time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConnsPerHost: 64,
		IdleConnTimeout:     90 * time.Second,
		TLSClientConfig:     cfg,
		Protocols:           Protocols(http2),
	}
	if http2 || os.Getenv("FENCER_CLIENT_NETHTTP") != "" {
		return &http.Client{Transport: std}
	}
	// HTTP/1.1: the caller's goroutine does the exchange (direct.go).
	return &http.Client{Transport: NewDirect(std)}
}

// Protocols is what a client's transport speaks: nil (the transport's
// default, HTTP/1.1 on plain TCP) or, with http2, HTTP/2 alone, which on
// plain TCP is h2c with prior knowledge (net/http uses it for http:// URLs
// only when HTTP/1 is left out).
func Protocols(http2 bool) *http.Protocols {
	if !http2 {
		return nil
	}
	var p http.Protocols
	p.SetHTTP2(true)
	p.SetUnencryptedHTTP2(true)
	return &p
}

// Request is one logical API call, sent in one or more attempts.
type Request struct {
	Method string
	Path   string // escaped, from /v1/
	Query  url.Values
	Body   []byte
	Header http.Header
	// Extra is added to the per-attempt timeout (an acquire's wait).
	Extra time.Duration
	// AttemptTimeout, when set, replaces the per-attempt timeout.
	AttemptTimeout time.Duration
	// UntilDone retries until ctx ends instead of Retry.Attempts times.
	UntilDone bool

	// Filled in by Do.
	FirstSent time.Time // send time of the first attempt
	Sent      time.Time // send time of the attempt that answered
	Retried   bool      // more than one attempt was sent
	// Uncertain: an earlier attempt may have reached the leader and taken
	// effect although its answer was lost.
	Uncertain bool
}

// Response is an answer, read in full.
type Response struct {
	Status int
	Header http.Header
	Body   []byte
}

// retryable reports whether an answer means "try again, maybe elsewhere":
// no leader, outcome unknown, or a gateway in between that failed.
func (r *Response) retryable() bool {
	switch r.Status {
	case http.StatusBadGateway, http.StatusGatewayTimeout:
		return true
	case http.StatusServiceUnavailable:
		var e wire.Error
		return json.Unmarshal(r.Body, &e) != nil || e.Code != wire.CodeInternal
	}
	return false
}

// Do sends r to the leader (or, when none is known, to an endpoint, which
// forwards), retrying connection errors and retryable answers. An attempt
// that could not reach its node (refused, reset, timed out) goes at once to
// another endpoint, which forwards it or holds it until a leader is known;
// only answers that say to retry, and a round of endpoints none of which
// answered, cost a backoff. Non-2xx answers come back as AnswerError's; an
// answer longer than MaxAnswerBytes as a BadAnswer, not retried (it was an
// answer, and a node that sends one may send it again).
func (t *Transport) Do(ctx context.Context, r *Request) (*Response, error) {
	var last error
	var unanswered string // the node of the last attempt, if it did not answer
	pauses, skipped := 0, 0
	for attempt := 1; ; attempt++ {
		base := t.target(ctx, unanswered)
		sent := time.Now()
		if attempt == 1 {
			r.FirstSent = sent
		} else {
			r.Retried = true
		}
		resp, err := t.send(ctx, base, r)
		if err == nil {
			t.follow(base, resp.Header.Get(wire.HeaderLeader))
		} else if errors.Is(err, t.cfg.BadAnswer) {
			r.Sent = sent
			return nil, err
		}
		if err == nil && !resp.retryable() {
			r.Sent = sent
			if resp.Status/100 != 2 {
				return resp, t.cfg.AnswerError(base, resp.Status, resp.Body)
			}
			return resp, nil
		}
		unanswered = ""
		if err == nil {
			// A forwarding node answers no_leader also when the leader
			// vanished mid-request, so any 5xx may hide a landed write.
			last = t.cfg.AnswerError(base, resp.Status, resp.Body)
			r.Uncertain = true
		} else {
			if ctx.Err() != nil {
				return nil, ctxErr(ctx, r, last)
			}
			last = fmt.Errorf("%w: %w", t.cfg.Unavailable, err)
			if !isDialError(err) {
				r.Uncertain = true
			}
			unanswered = base
		}
		t.forget(base)
		if !r.UntilDone && attempt >= t.cfg.Retry.Attempts {
			return nil, fmt.Errorf("%s %s: %d attempts: %w", r.Method, r.Path, attempt, last)
		}
		t.cfg.Log.Debug("fencer request failed; retrying", "method", r.Method, "path", r.Path, "endpoint", base, "attempt", attempt, "err", last)
		if unanswered != "" && skipped < len(t.cfg.Endpoints)-1 {
			skipped++
			continue // no pause: another node answers now
		}
		skipped = 0
		pauses++
		if err := Sleep(ctx, t.cfg.Retry.Backoff(pauses)); err != nil {
			return nil, ctxErr(ctx, r, last)
		}
	}
}

func ctxErr(ctx context.Context, r *Request, last error) error {
	if last == nil {
		return fmt.Errorf("%s %s: %w", r.Method, r.Path, context.Cause(ctx))
	}
	return fmt.Errorf("%s %s: %w (last error: %w)", r.Method, r.Path, context.Cause(ctx), last)
}

// send performs one attempt against base.
func (t *Transport) send(ctx context.Context, base string, r *Request) (*Response, error) {
	timeout := t.cfg.Timeout
	if r.AttemptTimeout > 0 {
		timeout = r.AttemptTimeout
	}
	ctx, cancelTimeout := context.WithTimeout(ctx, timeout+r.Extra)
	defer cancelTimeout()
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	if r.Path != "/v1/cluster" && base == t.Leader() && len(t.cfg.Endpoints) > 1 {
		defer t.watchLeader(ctx, base, cancel)()
	}
	var body io.Reader
	if r.Body != nil {
		body = bytes.NewReader(r.Body)
	}
	var reused atomic.Bool
	ctx = httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{
		GotConn: func(info httptrace.GotConnInfo) { reused.Store(info.Reused) },
	})
	resp, err := t.Open(ctx, base, r.Method, r.Path, r.Query, r.Header, body)
	if err != nil {
		if cause := context.Cause(ctx); errors.Is(cause, errLeaderMoved) {
			return nil, fmt.Errorf("%s did not answer: %w", base, cause)
		}
		if !reused.Load() && closedWithoutReply(err) {
			return nil, fmt.Errorf("%s closed the connection without an HTTP reply: this looks like a Raft port, not fencer's HTTP API (%w)", base, err)
		}
		return nil, err
	}
	defer resp.Body.Close()
	// A longer answer than the limit is refused, and never read whole: at
	// once when its Content-Length says so, else one byte past the limit.
	max := t.cfg.MaxAnswerBytes
	var b []byte
	if resp.ContentLength <= max {
		if b, err = readBody(resp, max); err != nil {
			return nil, err
		}
	}
	if resp.ContentLength > max || int64(len(b)) > max {
		return nil, fmt.Errorf("%w: %s %s via %s: the answer is longer than the client's limit of %d bytes (WithMaxAnswerBytes)", t.cfg.BadAnswer, r.Method, r.Path, base, max)
	}
	return &Response{Status: resp.StatusCode, Header: resp.Header, Body: b}, nil
}

// errLeaderMoved: an attempt sent to the leader got no answer while the
// other members named another leader.
var errLeaderMoved = errors.New("the other members name another leader")

// leaderCheckAfter is how long an attempt at the leader runs before the
// client asks the other members who leads, and then again at doubling
// intervals up to leaderCheckEvery.
const (
	leaderCheckAfter = time.Second
	leaderCheckEvery = 8 * time.Second
)

// watchLeader cancels (cancel, with errLeaderMoved) an attempt sent to
// base, the leader as this client knew it, once the other members name
// another leader, and follows that one; it returns a function that stops
// watching. A leader that stops answering without closing its connections
// (a frozen process or host) otherwise held the attempt for its whole
// timeout, 10 s by default, long after the next leader served: what its
// answer would have been is unknown, so the retry that follows is as after
// a lost answer. A healthy leader holding a long acquire costs one status
// request to another member now and then.
//
// It is a timer, not a goroutine, until the first check is due: nearly every
// attempt ends long before, and the request path pays no extra hand-off.
func (t *Transport) watchLeader(ctx context.Context, base string, cancel context.CancelCauseFunc) (stop func()) {
	var mu sync.Mutex
	var timer *time.Timer
	stopped := false
	every := leaderCheckAfter
	var check func()
	check = func() {
		if ctx.Err() != nil {
			return
		}
		if other := t.otherLeader(ctx, base); other != "" {
			t.mu.Lock()
			if t.leader == base {
				t.leader = other
			}
			t.mu.Unlock()
			cancel(errLeaderMoved)
			return
		}
		mu.Lock()
		defer mu.Unlock()
		if !stopped {
			every = min(2*every, leaderCheckEvery)
			timer.Reset(every)
		}
	}
	mu.Lock()
	timer = time.AfterFunc(every, check)
	mu.Unlock()
	return func() {
		mu.Lock()
		stopped = true
		mu.Unlock()
		timer.Stop()
	}
}

// otherLeader asks the endpoints other than base who leads, and returns the
// base URL of the first leader named that is not base ("" if none is).
func (t *Transport) otherLeader(ctx context.Context, base string) string {
	u, err := url.Parse(base)
	if err != nil {
		return ""
	}
	for _, ep := range t.cfg.Endpoints {
		if ep == base || ctx.Err() != nil {
			continue
		}
		st, err := t.ClusterStatus(ctx, ep)
		if err != nil || st.Leader == "" {
			continue
		}
		for _, m := range st.Members {
			if m.ID == st.Leader && m.HTTPAddr != "" {
				if leader := u.Scheme + "://" + m.HTTPAddr; leader != base {
					return leader
				}
				return "" // base still leads, as this member sees it
			}
		}
	}
	return ""
}

// readBody reads an answer's body, up to one byte past max (so that a
// longer one shows), into a buffer of its Content-Length when that is
// known: an answer costs one allocation rather than ReadAll's growing ones.
func readBody(resp *http.Response, max int64) ([]byte, error) {
	limit := max + 1
	if n := resp.ContentLength; n >= 0 && n < limit {
		b := make([]byte, n, n+1)
		if _, err := io.ReadFull(resp.Body, b); err != nil {
			return nil, err
		}
		// Anything past the length (net/http never gives more) is read
		// as ReadAll would, to the limit.
		if k, _ := resp.Body.Read(b[n : n+1]); k == 0 {
			return b, nil
		}
		rest, err := io.ReadAll(io.LimitReader(resp.Body, limit-n-1))
		return append(b[:n+1], rest...), err
	}
	return io.ReadAll(io.LimitReader(resp.Body, limit))
}

// Open sends one request to base, with the client's credentials, and hands
// back the open answer whatever its status: for what is read as a stream
// (events, snapshots), and for each attempt of Do.
func (t *Transport) Open(ctx context.Context, base, method, path string, query url.Values, header http.Header, body io.Reader) (*http.Response, error) {
	u := base + path
	if len(query) > 0 {
		u += "?" + query.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, method, u, body)
	if err != nil {
		return nil, err
	}
	for k, v := range header {
		req.Header[k] = v
	}
	if t.cfg.Authorization != "" {
		req.Header.Set("Authorization", t.cfg.Authorization)
	}
	return t.cfg.HTTP.Do(req)
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

// isDialError reports whether err happened before anything was sent.
func isDialError(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}

// Target returns the base URL to send a request to: the cached leader, a
// freshly discovered one, or the next endpoint.
func (t *Transport) Target(ctx context.Context) string { return t.target(ctx, "") }

// target is Target after an attempt that did not reach its node
// (unanswered): it then returns another endpoint without asking who leads:
// the members' own view may still name a leader that is gone, and any
// member forwards.
func (t *Transport) target(ctx context.Context, unanswered string) string {
	t.mu.Lock()
	leader := t.leader
	t.mu.Unlock()
	if leader != "" && leader != unanswered {
		return leader
	}
	if unanswered == "" {
		if leader = t.discover(ctx); leader != "" {
			return leader
		}
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	eps := t.cfg.Endpoints
	for range eps {
		if ep := eps[t.next%len(eps)]; ep != unanswered {
			return ep
		}
		t.next++
	}
	return eps[t.next%len(eps)]
}

// follow caches the leader a forwarding member named (wire.HeaderLeader) in
// an answer from base, so that the next request goes to it directly.
func (t *Transport) follow(base, leaderAddr string) {
	if leaderAddr == "" {
		return
	}
	u, err := url.Parse(base)
	if err != nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.leader = u.Scheme + "://" + leaderAddr
}

// discover asks the endpoints, in turn, who leads, and caches the answer.
func (t *Transport) discover(ctx context.Context) string {
	t.discoverMu.Lock()
	defer t.discoverMu.Unlock()
	t.mu.Lock()
	leader, start := t.leader, t.next
	t.mu.Unlock()
	if leader != "" {
		return leader // found while we waited
	}
	eps := t.cfg.Endpoints
	for i := range eps {
		ep := eps[(start+i)%len(eps)]
		st, err := t.ClusterStatus(ctx, ep)
		if err != nil {
			t.cfg.Log.Debug("fencer leader discovery failed", "endpoint", ep, "err", err)
			continue
		}
		for _, m := range st.Members {
			if m.ID == st.Leader && st.Leader != "" && m.HTTPAddr != "" {
				u, _ := url.Parse(ep)
				leader = u.Scheme + "://" + m.HTTPAddr
				t.mu.Lock()
				t.leader, t.next = leader, start+i
				t.mu.Unlock()
				return leader
			}
		}
	}
	return ""
}

// ClusterStatus asks the member at base, and only it, for GET /v1/cluster.
func (t *Transport) ClusterStatus(ctx context.Context, base string) (wire.ClusterStatus, error) {
	var st wire.ClusterStatus
	resp, err := t.send(ctx, base, &Request{Method: http.MethodGet, Path: "/v1/cluster", AttemptTimeout: min(t.cfg.Timeout, 2*time.Second)})
	if err != nil {
		return st, err
	}
	if resp.Status != http.StatusOK {
		return st, t.cfg.AnswerError(base, resp.Status, resp.Body)
	}
	return st, t.Decode(resp, &st)
}

// forget drops base as the leader after it failed, and moves on to the next
// endpoint.
func (t *Transport) forget(base string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.leader == base {
		t.leader = ""
	}
	t.next++
}

// Config returns the configuration the Transport was made with.
func (t *Transport) Config() Config { return t.cfg }

// Leader returns the base URL of the cached leader, "" when none is known.
func (t *Transport) Leader() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.leader
}

// Endpoints returns the endpoints' base URLs; the caller must not change
// them.
func (t *Transport) Endpoints() []string { return t.cfg.Endpoints }

// CloseIdleConnections closes the HTTP client's idle connections.
func (t *Transport) CloseIdleConnections() { t.cfg.HTTP.CloseIdleConnections() }

// Backoff returns the pause before retry n (n >= 1): exponential, capped,
// with "equal jitter" so that clients do not retry in lockstep.
func (r Retry) Backoff(n int) time.Duration {
	d := r.MinBackoff << min(n-1, 20)
	if d <= 0 || d > r.MaxBackoff {
		d = r.MaxBackoff
	}
	return d/2 + rand.N(d/2+1)
}

// Sleep waits d, or until ctx ends (its error).
func Sleep(ctx context.Context, d time.Duration) error {
	tm := time.NewTimer(d)
	defer tm.Stop()
	select {
	case <-tm.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// GetJSON and PostJSON are Do for JSON requests and answers.
func (t *Transport) GetJSON(ctx context.Context, path string, query url.Values, out any) error {
	resp, err := t.Do(ctx, &Request{Method: http.MethodGet, Path: path, Query: query})
	if err != nil {
		return err
	}
	return t.Decode(resp, out)
}

// jsonHeader is the header of a JSON request that has no other, shared by
// all of them: Open only copies a Request's header into each attempt's.
var jsonHeader = http.Header{"Content-Type": {"application/json"}}

// PostJSON sends in as r's body (r.Method becomes POST) and decodes the
// answer into out.
func (t *Transport) PostJSON(ctx context.Context, r *Request, in, out any) error {
	b, err := json.Marshal(in)
	if err != nil {
		return err
	}
	r.Method, r.Body = http.MethodPost, b
	if r.Header == nil {
		r.Header = jsonHeader
	} else {
		r.Header.Set("Content-Type", "application/json")
	}
	resp, err := t.Do(ctx, r)
	if err != nil {
		return err
	}
	return t.Decode(resp, out)
}

// Decode reads a JSON answer into out; an answer that is not the JSON out
// describes (empty, HTML, truncated, a string for a number) is a
// BadAnswer.
func (t *Transport) Decode(resp *Response, out any) error {
	if err := json.Unmarshal(resp.Body, out); err != nil {
		return fmt.Errorf("%w: decoding the answer (HTTP %d, %d bytes): %w", t.cfg.BadAnswer, resp.Status, len(resp.Body), err)
	}
	return nil
}
