package api

import (
	"errors"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"time"

	"github.com/fencer-io/fencer/api/wire"
	"github.com/fencer-io/fencer/internal/acl"
)

// endToEnd are the request headers that say who asks and what the request
// means. A client may name any header in Connection, and a proxy then drops
// it as hop-by-hop: the forwarder copies these back from the incoming
// request, so the leader sees exactly what this node saw. Without this, a
// request whose Authorization was dropped reached the leader carrying only
// this node's certificate.
var endToEnd = []string{"Authorization", "Content-Type", wire.HeaderToken, wire.HeaderLock, wire.HeaderLogFormat}

// forwarder proxies requests to the leader over kept-alive connections.
type forwarder struct {
	c         Cluster
	scheme    string
	transport *http.Transport
}

func newForwarder(c Cluster) *forwarder {
	return &forwarder{c: c, scheme: "http", transport: &http.Transport{
		DialContext:         (&net.Dialer{Timeout: 2 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConnsPerHost: 256,
		IdleConnTimeout:     90 * time.Second,
	}}
}

// leaderOnly serves the request here when this node leads (or is becoming
// the leader) and forwards it to the leader otherwise. A request already
// forwarded once is never forwarded again.
func (f *forwarder) leaderOnly(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if f.c.IsLeader() || isStale(r) && r.Method == http.MethodGet {
			next.ServeHTTP(w, r)
			return
		}
		id, addr := f.c.Leader()
		if id == f.c.ID() {
			next.ServeHTTP(w, r) // leader, not ready yet: the handler waits
			return
		}
		if id == "" || addr == "" || r.Header.Get(wire.HeaderForwardedBy) != "" {
			writeError(w, http.StatusServiceUnavailable, &wire.Error{Code: wire.CodeNoLeader, Message: "no leader is known to " + f.c.ID() + "; retry"})
			return
		}
		f.proxy(w, r, addr)
	})
}

func (f *forwarder) proxy(w http.ResponseWriter, r *http.Request, addr string) {
	target := &url.URL{Scheme: f.scheme, Host: addr}
	rp := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(target)
			pr.Out.Host = addr
			for _, h := range endToEnd {
				h = http.CanonicalHeaderKey(h)
				if v, ok := pr.In.Header[h]; ok {
					pr.Out.Header[h] = v
				}
			}
			pr.Out.Header.Set(wire.HeaderForwardedBy, f.c.ID())
			pr.Out.Header.Del(wire.HeaderForwardedPrincipal)
			if p, ok := acl.PrincipalFrom(pr.In.Context()); ok {
				pr.Out.Header.Set(wire.HeaderForwardedPrincipal, p.Name)
			}
		},
		Transport: f.transport,
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			// A request that never reached the leader certainly did nothing;
			// one that failed afterwards may have been applied.
			var op *net.OpError
			if r.Method == http.MethodGet || errors.As(err, &op) && op.Op == "dial" {
				writeError(w, http.StatusServiceUnavailable, &wire.Error{Code: wire.CodeNoLeader, Message: "leader " + addr + " unreachable: " + err.Error()})
				return
			}
			writeError(w, http.StatusServiceUnavailable, &wire.Error{Code: wire.CodeOutcomeUnknown, Message: "connection to leader " + addr + " failed mid-request; the request may have been applied: " + err.Error()})
		},
	}
	rp.ServeHTTP(w, r)
}
