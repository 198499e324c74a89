package transport

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"time"
)

// direct is the client's HTTP/1.1 round tripper: the calling goroutine
// writes the request on a pooled connection and reads the answer itself, so
// a request costs none of the goroutine hand-offs of net/http's persistConn
// read and write loops (docs/benchmarks.md, "The request path, round 2").
//
// Its rules are net/http's where they matter to the client: a context's
// deadline becomes the connection's deadline and its cancellation closes the
// connection (context.AfterFunc, no goroutine until it fires); a connection
// goes back to the pool only once its answer's body has been read to the end
// and the answer allows reuse (no "Connection: close", a length or chunked
// framing); a request through a proxy (HTTP_PROXY and the like) goes through
// the fallback, net/http's own transport.
type direct struct {
	dialer   *net.Dialer
	tls      *tls.Config // nil: plain http only
	fallback *http.Transport

	maxIdle int // per host, the fallback's MaxIdleConnsPerHost

	mu   sync.Mutex
	idle map[string][]*directConn // by scheme://host
}

type directConn struct {
	c  net.Conn
	br *bufio.Reader
	bw *bufio.Writer
	// idleSince is when it went back to the pool.
	idleSince time.Time
}

// Idle connections: one idle longer than idleCheck is checked before it is
// used (the server may have closed it meanwhile: its answer to the next
// request would be lost, and a request that changes state is not sent
// again), and one idle longer than idleMax is closed (net/http's 90 s).
var (
	idleCheck = time.Second
	idleMax   = 90 * time.Second
)

// NewDirect returns the client's HTTP/1.1 round tripper, with fallback's
// TLS configuration and idle limit per host; fallback serves what it does
// not (proxies, other schemes).
func NewDirect(fallback *http.Transport) http.RoundTripper {
	maxIdle := fallback.MaxIdleConnsPerHost
	if maxIdle <= 0 {
		maxIdle = http.DefaultMaxIdleConnsPerHost
	}
	d := newDirect(fallback.TLSClientConfig, fallback)
	d.maxIdle = maxIdle
	return d
}

func newDirect(cfg *tls.Config, fallback *http.Transport) *direct {
	if cfg != nil {
		cfg = cfg.Clone()
		cfg.NextProtos = []string{"http/1.1"}
	}
	return &direct{
		dialer:   &net.Dialer{Timeout: time.Second, KeepAlive: 30 * time.Second},
		tls:      cfg,
		fallback: fallback,
		maxIdle:  64,
		idle:     map[string][]*directConn{},
	}
}

// RoundTrip implements http.RoundTripper.
func (d *direct) RoundTrip(req *http.Request) (*http.Response, error) {
	if p, err := http.ProxyFromEnvironment(req); err != nil || p != nil {
		return d.fallback.RoundTrip(req)
	}
	if req.URL.Scheme != "http" && !(req.URL.Scheme == "https" && d.tls != nil) {
		return d.fallback.RoundTrip(req)
	}
	ctx := req.Context()
	if err := ctx.Err(); err != nil {
		closeBody(req)
		return nil, err
	}
	key := req.URL.Scheme + "://" + req.URL.Host
	// A pooled connection the server has closed meanwhile fails on first
	// use; as in net/http, such a request is sent again once on a new
	// connection when none of it was written, or when the server closed
	// before answering a byte and the request is replayable (idempotent
	// method or an Idempotency-Key header).
	for attempt := 0; ; attempt++ {
		dc, reused := d.get(key)
		if dc == nil {
			var err error
			if dc, err = d.dial(ctx, req); err != nil {
				closeBody(req)
				return nil, err
			}
		}
		resp, sent, err := d.exchange(ctx, dc, req)
		if err == nil {
			return resp, nil
		}
		if reused && attempt == 0 && ctx.Err() == nil && canResend(req) &&
			(!sent || (errors.Is(err, errClosedUnanswered) && replayable(req))) {
			if req.GetBody != nil {
				body, gerr := req.GetBody()
				if gerr != nil {
					return nil, err
				}
				r2 := *req
				r2.Body = body
				req = &r2
			}
			continue
		}
		closeBody(req)
		return nil, err
	}
}

// connCtxErr is err, or the context's error when the context ended or its
// deadline (the connection's) has passed.
func connCtxErr(ctx context.Context, err error) error {
	if cerr := ctx.Err(); cerr != nil {
		return cerr
	}
	var ne net.Error
	if dl, ok := ctx.Deadline(); ok && errors.As(err, &ne) && ne.Timeout() && !time.Now().Before(dl) {
		return context.DeadlineExceeded
	}
	return err
}

// errClosedUnanswered is a request sent on a connection the server closed
// before a byte of its answer (net/http's "server closed idle connection").
var errClosedUnanswered = fmt.Errorf("the server closed the connection before answering: %w", io.ErrUnexpectedEOF)

func replayable(req *http.Request) bool {
	switch req.Method {
	case "", http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodTrace:
		// Not PUT or DELETE, which net/http's rule holds idempotent: a
		// fenced write sent again after its answer was lost must be the
		// client's decision (its answer may say the first one landed).
		return true
	}
	_, a := req.Header["Idempotency-Key"]
	_, b := req.Header["X-Idempotency-Key"]
	return a || b
}

func canResend(req *http.Request) bool {
	return req.Body == nil || req.Body == http.NoBody || req.GetBody != nil
}

func closeBody(req *http.Request) {
	if req.Body != nil {
		req.Body.Close()
	}
}

// exchange sends req on dc and reads the answer's head; sent says whether
// the request was written out. On error dc is closed.
func (d *direct) exchange(ctx context.Context, dc *directConn, req *http.Request) (resp *http.Response, sent bool, err error) {
	dl, _ := ctx.Deadline() // zero: none
	dc.c.SetDeadline(dl)
	var cancelled bool
	var cmu sync.Mutex
	stop := context.AfterFunc(ctx, func() {
		cmu.Lock()
		cancelled = true
		cmu.Unlock()
		dc.c.Close()
	})
	fail := func(err error) (*http.Response, bool, error) {
		stop()
		dc.c.Close()
		// The connection's deadline may fire before the context's
		// AfterFunc does: either way the caller sees the context's error.
		return nil, sent, connCtxErr(ctx, err)
	}
	if err := req.Write(dc.bw); err != nil {
		return fail(err)
	}
	if err := dc.bw.Flush(); err != nil {
		return fail(err)
	}
	sent = true
	if _, err := dc.br.Peek(1); errors.Is(err, io.EOF) {
		return fail(errClosedUnanswered)
	}
	resp, err = http.ReadResponse(dc.br, req)
	if err != nil {
		return fail(err)
	}
	reuse := !resp.Close && !req.Close &&
		(resp.ContentLength >= 0 || len(resp.TransferEncoding) > 0)
	resp.Body = &directBody{d: d, dc: dc, key: req.URL.Scheme + "://" + req.URL.Host,
		body: resp.Body, reuse: reuse, stop: stop, ctx: ctx,
		cancelled: func() bool { cmu.Lock(); defer cmu.Unlock(); return cancelled }}
	return resp, true, nil
}

func (d *direct) dial(ctx context.Context, req *http.Request) (*directConn, error) {
	addr := req.URL.Host
	if req.URL.Port() == "" {
		if req.URL.Scheme == "https" {
			addr = net.JoinHostPort(req.URL.Hostname(), "443")
		} else {
			addr = net.JoinHostPort(req.URL.Hostname(), "80")
		}
	}
	c, err := d.dialer.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	if req.URL.Scheme == "https" {
		cfg := d.tls
		if cfg.ServerName == "" {
			cfg = cfg.Clone()
			cfg.ServerName = req.URL.Hostname()
		}
		tc := tls.Client(c, cfg)
		if err := tc.HandshakeContext(ctx); err != nil {
			c.Close()
			return nil, err
		}
		c = tc
	}
	return &directConn{c: c, br: bufio.NewReader(c), bw: bufio.NewWriter(c)}, nil
}

func (d *direct) get(key string) (*directConn, bool) {
	for {
		d.mu.Lock()
		l := d.idle[key]
		if len(l) == 0 {
			d.mu.Unlock()
			return nil, false
		}
		dc := l[len(l)-1]
		d.idle[key] = l[:len(l)-1]
		d.mu.Unlock()
		if idle := time.Since(dc.idleSince); idle <= idleCheck || (idle <= idleMax && dc.alive()) {
			return dc, true
		}
		dc.c.Close()
	}
}

// alive reports whether an idle connection is still open and silent: its
// socket holds neither the server's close nor bytes nobody asked for
// (peekIdle, which does not wait).
func (dc *directConn) alive() bool {
	if dc.br.Buffered() > 0 {
		return false
	}
	c := dc.c
	if tc, ok := c.(*tls.Conn); ok {
		c = tc.NetConn()
	}
	return peekIdle(c)
}

func (d *direct) put(key string, dc *directConn) {
	dc.c.SetDeadline(time.Time{})
	dc.idleSince = time.Now()
	d.mu.Lock()
	if len(d.idle[key]) < d.maxIdle {
		d.idle[key] = append(d.idle[key], dc)
		dc = nil
	}
	d.mu.Unlock()
	if dc != nil {
		dc.c.Close()
	}
}

// CloseIdleConnections closes the pooled connections (http.Client calls it).
func (d *direct) CloseIdleConnections() {
	d.mu.Lock()
	idle := d.idle
	d.idle = map[string][]*directConn{}
	d.mu.Unlock()
	for _, l := range idle {
		for _, dc := range l {
			dc.c.Close()
		}
	}
	d.fallback.CloseIdleConnections()
}

// directBody is an answer's body: at its end the connection goes back to
// the pool (when the answer allows), closed early it closes the connection.
type directBody struct {
	d         *direct
	dc        *directConn
	key       string
	body      io.ReadCloser
	reuse     bool
	stop      func() bool
	ctx       context.Context
	cancelled func() bool

	mu   sync.Mutex
	done bool
}

func (b *directBody) Read(p []byte) (int, error) {
	n, err := b.body.Read(p)
	if err == io.EOF {
		b.finish(true)
	} else if err != nil {
		b.finish(false)
		err = connCtxErr(b.ctx, err)
	}
	return n, err
}

func (b *directBody) Close() error {
	b.finish(false)
	return nil
}

// finish releases the connection once: to the pool when the body was read
// to its end, reuse is allowed and the context did not close it.
func (b *directBody) finish(atEOF bool) {
	b.mu.Lock()
	if b.done {
		b.mu.Unlock()
		return
	}
	b.done = true
	b.mu.Unlock()
	stopped := b.stop() // false: the cancellation already closed the conn
	if atEOF && b.reuse && stopped && b.dc.br.Buffered() == 0 {
		b.d.put(b.key, b.dc)
		return
	}
	b.dc.c.Close()
}

var _ http.RoundTripper = (*direct)(nil)

// peekIdleByDeadline is peekIdle by a read with a 1 ms deadline (a deadline
// already past makes Go answer without reading); a byte it reads makes the
// connection unusable anyway.
func peekIdleByDeadline(c net.Conn) bool {
	c.SetReadDeadline(time.Now().Add(time.Millisecond))
	var b [1]byte
	_, err := c.Read(b[:])
	c.SetReadDeadline(time.Time{})
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}
