package acl

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"time"

	"github.com/fencer-io/fencer/api/wire"
	"github.com/fencer-io/fencer/internal/tlsutil"
)

// Option configures Middleware.
type Option func(*options)

type options struct {
	nodeCerts bool
	audit     *slog.Logger
}

// WithNodeCerts makes a request without an Authorization header that
// presents a verified node certificate (see tlsutil.IsNodeCert) a RoleNode
// principal named "node:CN": nodes join, probe each other and remove
// themselves with it. A request such a node forwarded on someone else's
// behalf is the node it names in wire.HeaderForwardedPrincipal, or nobody;
// never the forwarding node. It needs the HTTP server to verify client
// certificates against the cluster CA (tlsutil.ServerConfig with a CA).
func WithNodeCerts() Option { return func(o *options) { o.nodeCerts = true } }

// WithAudit logs every membership, leadership, snapshot and unknown-route
// request, allowed or not: who, what, when and the status answered.
func WithAudit(log *slog.Logger) Option { return func(o *options) { o.audit = log } }

type principalKey struct{}

// PrincipalFrom returns the principal Middleware authenticated, if any.
func PrincipalFrom(ctx context.Context) (*Principal, bool) {
	p, ok := ctx.Value(principalKey{}).(*Principal)
	return p, ok
}

// Middleware authenticates and authorizes every request but the open probes:
// 401 unauthorized (with WWW-Authenticate: Bearer) without a valid token, 403
// forbidden outside the token's role or prefixes. Put it in front of the
// whole API, before forwarding, so a follower refuses what the leader would.
func Middleware(s *Store, opts ...Option) func(http.Handler) http.Handler {
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			route := Classify(r)
			if route.Open {
				next.ServeHTTP(w, r)
				return
			}
			p, err := s.authenticate(r, o.nodeCerts)
			audited := o.audit != nil && isAudited(route.Action)
			if err != nil {
				challenge := `Bearer realm="fencer"`
				if !errors.Is(err, ErrNoCredentials) {
					challenge += `, error="invalid_token"`
				}
				w.Header().Set("WWW-Authenticate", challenge)
				code := wire.CodeUnauthorized
				if errors.Is(err, ErrKeyedMember) {
					code = wire.CodeKeyedMember // a joiner's probe learns that its id is a member's
				}
				wire.WriteError(w, http.StatusUnauthorized, &wire.Error{Code: code, Message: err.Error()})
				if audited {
					audit(o.audit, r, route, nil, http.StatusUnauthorized)
				}
				return
			}
			if msg := refusal(p, route); msg != "" {
				wire.WriteError(w, http.StatusForbidden, &wire.Error{Code: wire.CodeForbidden, Message: msg})
				if audited {
					audit(o.audit, r, route, p, http.StatusForbidden)
				}
				return
			}
			ctx := context.WithValue(r.Context(), principalKey{}, p)
			sess := &Session{store: s, p: p}
			if p.Role != RoleNode {
				sess.bearer, _ = ParseBearer(r.Header.Get("Authorization"))
			}
			r = r.WithContext(context.WithValue(ctx, sessionKey{}, sess))
			if !audited {
				next.ServeHTTP(w, r)
				return
			}
			sw := &statusWriter{ResponseWriter: w, status: http.StatusOK}
			next.ServeHTTP(sw, r)
			audit(o.audit, r, route, p, sw.status)
		})
	}
}

// authenticate returns the request's principal: its bearer token's when it
// has one; else, with node certificates on, the node that sent it. A
// request a member forwarded (wire.HeaderForwardedBy) is believed only as
// what that member's own certificate proves: the member itself, forwarding
// its own request. Its word for another node, or for a client, is never
// taken (F8: any node certificate removed any member by naming it in
// wire.HeaderForwardedPrincipal), and a client that had its Authorization
// dropped on the way is refused as having none.
func authenticate(a *ACL, r *http.Request, nodeCerts bool) (*Principal, error) {
	if !nodeCerts || len(r.Header.Values("Authorization")) > 0 {
		return a.Authenticate(r)
	}
	sender := nodeID(r)
	if sender == "" {
		return a.Authenticate(r)
	}
	by := r.Header.Get(wire.HeaderForwardedBy)
	if by == "" {
		return nodePrincipal(sender), nil
	}
	if by == sender && r.Header.Get(wire.HeaderForwardedPrincipal) == "node:"+sender {
		return nodePrincipal(sender), nil
	}
	return nil, ErrNoCredentials
}

// nodeID is the common name of the request's verified node certificate, or
// "" when it presents none.
func nodeID(r *http.Request) string {
	if r.TLS == nil || len(r.TLS.VerifiedChains) == 0 {
		return ""
	}
	if leaf := r.TLS.VerifiedChains[0][0]; tlsutil.IsNodeCert(leaf) {
		return leaf.Subject.CommonName
	}
	return ""
}

// nodePrincipal is member id, authenticated by its node certificate or the
// cluster secret.
func nodePrincipal(id string) *Principal {
	return &Principal{Name: "node:" + id, Role: RoleNode, Node: id}
}

// refusal says why p may not make the request, or "" when it may.
func refusal(p *Principal, route Route) string {
	if route.Session {
		if !p.may(route.Action) {
			return "token " + p.Name + " (" + string(p.Role) + ") may not " + string(route.Action) + " under a session"
		}
		return ""
	}
	if route.Names {
		if !p.may(route.Action) {
			return "token " + p.Name + " (" + string(p.Role) + ") may not " + string(route.Action) + " a multi-lock"
		}
		return ""
	}
	if !Allow(p, route.Action, route.Resource) {
		msg := "token " + p.Name + " (" + string(p.Role) + ") may not " + string(route.Action)
		if route.Resource != "" {
			msg += " " + route.Resource
		}
		return msg
	}
	for _, lock := range route.FencingLocks {
		if lock != "" && !Allow(p, ActionReadLock, lock) {
			return "token " + p.Name + " (" + string(p.Role) + ") may not name lock " + lock + " in " + wire.HeaderLock
		}
	}
	return ""
}

func isAudited(a Action) bool {
	switch a {
	case ActionJoin, ActionMembership, ActionTransfer, ActionSnapshot, ActionDeleteKey, ActionRevoke, ActionAdmin:
		return true
	}
	return false
}

func audit(log *slog.Logger, r *http.Request, route Route, p *Principal, status int) {
	who := "anonymous"
	if p != nil {
		who = p.Name
	}
	attrs := []any{"who", who, "action", string(route.Action), "method", r.Method, "path", r.URL.Path,
		"remote", r.RemoteAddr, "status", status, "at", time.Now().UTC().Format(time.RFC3339Nano)}
	if via := r.Header.Get(wire.HeaderForwardedBy); via != "" && nodeID(r) != "" {
		attrs = append(attrs, "via", via) // the member that forwarded it
	}
	log.Info("audit", attrs...)
}

type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	w.status = code
	w.ResponseWriter.WriteHeader(code)
}

// Unwrap lets http.ResponseController reach the real writer.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
