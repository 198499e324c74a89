package proxy

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptrace"
	"net/http/httputil"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/fencer-io/fencer/api/client"
	"github.com/fencer-io/fencer/api/wire"
	"github.com/fencer-io/fencer/fence"
)

// DefaultMethods are the methods a proxy fences when Config.Methods is
// empty.
var DefaultMethods = []string{http.MethodPut, http.MethodPost, http.MethodPatch, http.MethodDelete}

// LockChecker asks the cluster whether token is lock name's current grant
// (GET /v1/locks/{name}/check); *client.Client is one.
type LockChecker interface {
	Check(ctx context.Context, name string, token uint64) (wire.CheckResponse, error)
}

// Config configures a Proxy. Zero values mean the defaults.
type Config struct {
	// Upstream is the service the proxy fences: scheme and host, and a
	// path prefix if any. Required.
	Upstream *url.URL
	// Methods are the methods that must carry a token; nil means
	// DefaultMethods. Every other method passes through unchecked.
	Methods []string
	// KeyPattern takes each write's fence key from its path, such as
	// "/v1/items/{id}" (see the package doc); "" makes the whole upstream
	// one fence, WholeUpstream. A fenced write whose path does not match
	// is refused (400 empty_key).
	KeyPattern string
	// Locks checks a write's Fencing-Lock header. With nil, a write that
	// names a lock is refused (500 internal): the proxy cannot check it.
	Locks LockChecker
	// MaxBodyBytes bounds a fenced write's body, read in full before the
	// key is locked; 0 means fence.MaxBodyBytes (8 MiB).
	MaxBodyBytes int64
	// Transport reaches the upstream; nil means http.DefaultTransport.
	Transport http.RoundTripper
	// Logger; nil means slog.Default().
	Logger *slog.Logger
}

// Validate reports whether the configuration is usable.
func (c *Config) Validate() error {
	if c.Upstream == nil || (c.Upstream.Scheme != "http" && c.Upstream.Scheme != "https") || c.Upstream.Host == "" {
		return errors.New("fence proxy: the upstream must be an http:// or https:// URL with a host")
	}
	if c.MaxBodyBytes < 0 {
		return fmt.Errorf("fence proxy: negative MaxBodyBytes %d", c.MaxBodyBytes)
	}
	for _, m := range c.Methods {
		if m == "" || strings.ToUpper(m) != m || strings.ContainsAny(m, " \t/") {
			return fmt.Errorf("fence proxy: method %q: want an upper-case HTTP method such as PUT", m)
		}
	}
	if c.KeyPattern != "" {
		if _, err := parsePattern(c.KeyPattern); err != nil {
			return fmt.Errorf("fence proxy: %w", err)
		}
	}
	return nil
}

// Proxy is an http.Handler that forwards requests to the upstream and lets
// a fenced write through only if its token passes its key's mark; see the
// package doc.
type Proxy struct {
	cfg     Config
	marks   *Marks
	pattern *keyPattern // nil: the whole upstream is one fence
	fenced  map[string]bool
	keys    keyLocks
	rp      *httputil.ReverseProxy
	log     *slog.Logger
}

// New returns a proxy over marks, which must have been opened with
// cfg.KeyPattern.
func New(marks *Marks, cfg Config) (*Proxy, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	p := &Proxy{cfg: cfg, marks: marks, fenced: map[string]bool{}, log: cfg.Logger}
	if p.log == nil {
		p.log = slog.Default()
	}
	if p.cfg.MaxBodyBytes == 0 {
		p.cfg.MaxBodyBytes = fence.MaxBodyBytes
	}
	if cfg.KeyPattern != "" {
		p.pattern, _ = parsePattern(cfg.KeyPattern) // checked by Validate
	}
	methods := cfg.Methods
	if len(methods) == 0 {
		methods = DefaultMethods
	}
	for _, m := range methods {
		p.fenced[m] = true
	}
	upstream := cfg.Upstream
	p.rp = &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(upstream)
			pr.SetXForwarded()
		},
		Transport:      cfg.Transport,
		ModifyResponse: p.settle,
		ErrorHandler:   p.upstreamFailed,
	}
	return p, nil
}

// write is a fenced write in flight: what settle and upstreamFailed need to
// put its mark back.
type write struct {
	key   string
	prev  fence.Mark
	token uint64
	sent  atomic.Bool // the upstream may have received the whole request
}

type writeKey struct{}

func (p *Proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !p.fenced[r.Method] {
		p.rp.ServeHTTP(w, r)
		return
	}
	p.serveWrite(w, r)
}

func (p *Proxy) serveWrite(w http.ResponseWriter, r *http.Request) {
	token, seq, err := fenceFromHeader(r.Header)
	if err != nil {
		fence.WriteError(w, err)
		return
	}
	key := WholeUpstream
	if p.pattern != nil {
		var ok bool
		if key, ok = p.pattern.key(r.URL.EscapedPath()); !ok {
			fence.WriteError(w, fmt.Errorf("%w: %s %s does not match the key pattern %s, so the proxy cannot fence it", fence.ErrEmptyKey, r.Method, r.URL.EscapedPath(), p.pattern.raw))
			return
		}
	}
	lock, err := lockName(r.Header)
	if err != nil {
		wire.WriteError(w, http.StatusBadRequest, &wire.Error{Code: wire.CodeInvalidName, Message: err.Error()})
		return
	}
	// Read the body before locking the key, so that a slow client cannot
	// hold up the key's other writers, and so that the request can be
	// resent by the transport on a dead kept-alive connection.
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, p.cfg.MaxBodyBytes))
	if err != nil {
		fence.WriteError(w, err)
		return
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	r.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
	r.ContentLength = int64(len(body))

	// One write per key at a time, from the check to the upstream's
	// answer: two writes of one key checked at once would both pass a mark
	// below them both and reach the upstream in either order.
	unlock, err := p.keys.lock(r.Context(), key)
	if err != nil {
		return // the client has gone
	}
	defer unlock()

	if lock != "" && !p.checkLock(w, r, lock, token) {
		return
	}
	// The mark is advanced, on disk, before the write is sent, and put back
	// only when the upstream refuses it: a write whose outcome the proxy
	// never learns (its own crash, a lost answer) counts as made. Advance
	// is the one place the token is compared with the mark.
	prev, err := p.marks.Advance(key, token, seq)
	if err != nil {
		fence.WriteError(w, err)
		return
	}
	wr := &write{key: key, prev: prev, token: token}
	ctx := context.WithValue(r.Context(), writeKey{}, wr)
	ctx = httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{WroteHeaders: func() { wr.sent.Store(true) }})
	p.rp.ServeHTTP(w, r.WithContext(ctx))
}

// checkLock answers and returns false unless token is lock's current grant.
func (p *Proxy) checkLock(w http.ResponseWriter, r *http.Request, lock string, token uint64) bool {
	if p.cfg.Locks == nil {
		wire.WriteError(w, http.StatusInternalServerError, &wire.Error{Code: wire.CodeInternal,
			Message: "the write names a lock in " + wire.HeaderLock + " but this proxy has no cluster to check it against"})
		return false
	}
	res, err := p.cfg.Locks.Check(r.Context(), lock, token)
	if err != nil {
		// The proxy cannot tell, so the write does not pass.
		body := &wire.Error{Code: wire.CodeNoLeader, Message: fmt.Sprintf("checking lock %q with the cluster: %v", lock, err)}
		var apiErr *client.APIError
		if errors.As(err, &apiErr) && apiErr.Code != "" {
			body.Code = apiErr.Code
		}
		wire.WriteError(w, http.StatusServiceUnavailable, body)
		return false
	}
	if !res.Current {
		wire.WriteError(w, http.StatusConflict, &wire.Error{Code: wire.CodeNotLockHolder,
			Message: fmt.Sprintf("token %d is not the current grant of lock %q", token, lock)})
		return false
	}
	return true
}

// settle runs when the upstream has answered a request, before the answer
// is sent on. A fenced write's mark stays advanced only on a 2xx.
func (p *Proxy) settle(resp *http.Response) error {
	wr, _ := resp.Request.Context().Value(writeKey{}).(*write)
	if wr == nil || resp.StatusCode >= 200 && resp.StatusCode < 300 {
		return nil
	}
	if resp.StatusCode == http.StatusSwitchingProtocols {
		// What would flow over the upgraded connection is not fenced, so
		// the connection is refused; whether the upstream acted on the
		// request is unknown, so its mark stays (see upstreamFailed).
		return errors.New("the upstream switched protocols on a fenced write")
	}
	p.revert(wr)
	return nil
}

func (p *Proxy) revert(wr *write) {
	if err := p.marks.Revert(wr.key, wr.prev); err != nil {
		// Failing closed: the mark stays at the refused write's token,
		// which refuses more, never less.
		p.log.Error("fence proxy: could not put a refused write's mark back", "key", wr.key, "token", wr.token, "err", err)
	}
}

// upstreamFailed answers a request the upstream gave no answer to.
func (p *Proxy) upstreamFailed(w http.ResponseWriter, r *http.Request, err error) {
	wr, _ := r.Context().Value(writeKey{}).(*write)
	switch {
	case wr == nil:
		wire.WriteError(w, http.StatusBadGateway, &wire.Error{Code: wire.CodeInternal, Message: "upstream: " + err.Error()})
	case !wr.sent.Load():
		p.revert(wr)
		wire.WriteError(w, http.StatusBadGateway, &wire.Error{Code: wire.CodeInternal,
			Message: "upstream unreachable, the write was not sent: " + err.Error()})
	default:
		// The upstream may have made the write: the mark stays, so no
		// older token can follow it; a retry needs a greater token or
		// a Fencing-Sequence.
		wire.WriteError(w, http.StatusBadGateway, &wire.Error{Code: wire.CodeOutcomeUnknown,
			Message: "the write was sent but the upstream's answer was lost; its token " + strconv.FormatUint(wr.token, 10) + " stays the key's mark: " + err.Error()})
	}
}

// fenceFromHeader reads the token and optional sequence as fence.Middleware
// does: a header sent twice is malformed, since picking one is guessing.
func fenceFromHeader(h http.Header) (token, seq uint64, err error) {
	tokens := h.Values(wire.HeaderToken)
	if len(tokens) != 1 {
		return 0, 0, fmt.Errorf("%w: %d %s headers", fence.ErrMissingToken, len(tokens), wire.HeaderToken)
	}
	if token, err = fence.ParseToken(tokens[0]); err != nil {
		return 0, 0, err
	}
	switch seqs := h.Values(wire.HeaderSequence); len(seqs) {
	case 0:
		return token, 0, nil
	case 1:
		seq, err = fence.ParseSequence(seqs[0])
		return token, seq, err
	default:
		return 0, 0, fmt.Errorf("%w: %d %s headers", fence.ErrMalformedSequence, len(seqs), wire.HeaderSequence)
	}
}

func lockName(h http.Header) (string, error) {
	switch names := h.Values(wire.HeaderLock); len(names) {
	case 0:
		return "", nil
	case 1:
		if !wire.ValidName(names[0]) {
			return "", fmt.Errorf("%s %.64q is not a lock name", wire.HeaderLock, names[0])
		}
		return names[0], nil
	default:
		return "", fmt.Errorf("%d %s headers, want one", len(names), wire.HeaderLock)
	}
}
