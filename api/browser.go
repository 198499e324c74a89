package api

import (
	"net"
	"net/http"
	"net/netip"
	"strings"

	"github.com/fencer-io/fencer/api/wire"
)

// WithBrowserGuard protects a node without access control from web pages,
// which can reach any address the browser can. It refuses:
//   - a request whose Host is a name other than localhost, a name in hosts,
//     or a name in a member's HTTP address (421 host_not_allowed). A page
//     whose own name an attacker re-points at the node's address (DNS
//     rebinding) sends its own name in Host: refusing it keeps the page from
//     reading answers, snapshots with every lease secret among them. IP
//     addresses are always fine: a page cannot rebind those.
//   - a state change a browser sends from another origin (403 cross_origin;
//     http.CrossOriginProtection, which reads Sec-Fetch-Site and Origin).
//     JSON bodies must be application/json anyway, but restore and transfer
//     can be sent without one.
//
// Clients other than browsers send neither Sec-Fetch-Site nor Origin, and
// reach nodes by the addresses the cluster knows, so they are unaffected.
func WithBrowserGuard(hosts []string) Option {
	return func(s *Server) {
		g := &browserGuard{c: s.c, hosts: map[string]bool{"localhost": true}}
		for _, h := range hosts {
			if name := hostName(h); name != "" {
				g.hosts[name] = true
			}
		}
		s.guard = g
	}
}

type browserGuard struct {
	c     Cluster
	hosts map[string]bool
}

func (g *browserGuard) middleware(next http.Handler) http.Handler {
	cop := http.NewCrossOriginProtection()
	cop.SetDenyHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusForbidden, &wire.Error{Code: wire.CodeCrossOrigin,
			Message: "a browser sent this " + r.Method + " from another origin; a node without access control takes state changes only from its own origin or from clients that are not browsers"})
	}))
	next = cop.Handler(next)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !g.allowed(hostName(r.Host)) {
			writeError(w, http.StatusMisdirectedRequest, &wire.Error{Code: wire.CodeHostNotAllowed,
				Message: "this node has no access control and answers to IP addresses, localhost and its members' names only, not " + quoteHost(r.Host) + "; list the name in --allowed-hosts (or set --acl-file)"})
			return
		}
		next.ServeHTTP(w, r)
	})
}

// allowed reports whether a request may name host. Members' names are
// looked up only for a name not listed, so the common cases cost a map
// lookup.
func (g *browserGuard) allowed(host string) bool {
	if host == "" || g.hosts[host] {
		return true
	}
	if _, err := netip.ParseAddr(host); err == nil {
		return true
	}
	st, err := g.c.Status()
	if err != nil {
		return false
	}
	for _, m := range st.Members {
		if hostName(m.HTTPAddr) == host {
			return true
		}
	}
	return false
}

// hostName is the host of a Host header or an HTTP address
// ([http[s]://]HOST[:PORT]): lower case, without brackets or a trailing dot.
func hostName(s string) string {
	s = strings.TrimPrefix(strings.TrimPrefix(s, "http://"), "https://")
	if h, _, err := net.SplitHostPort(s); err == nil {
		s = h
	}
	s = strings.TrimSuffix(strings.TrimPrefix(s, "["), "]")
	return strings.TrimSuffix(strings.ToLower(s), ".")
}

func quoteHost(h string) string {
	if len(h) > 64 {
		h = h[:64]
	}
	return `"` + strings.ToValidUTF8(h, "?") + `"`
}
