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
// presents a verified node certificate (see tlsutil.IsNodeCert) an operator
// named "node:CN". Nodes use it to join and to probe each other. It needs the
// HTTP server to verify client certificates against the cluster CA
// (tlsutil.ServerConfig with a CA); a node certificate already lets its
// holder vote and replicate, so this grants nothing more.
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
				wire.WriteError(w, http.StatusUnauthorized, &wire.Error{Code: wire.CodeUnauthorized, Message: err.Error()})
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
			r = r.WithContext(context.WithValue(r.Context(), principalKey{}, p))
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

func authenticate(a *ACL, r *http.Request, nodeCerts bool) (*Principal, error) {
	if nodeCerts && len(r.Header.Values("Authorization")) == 0 && r.TLS != nil && len(r.TLS.VerifiedChains) > 0 {
		if leaf := r.TLS.VerifiedChains[0][0]; tlsutil.IsNodeCert(leaf) {
			return nodePrincipal(leaf.Subject.CommonName), nil
		}
	}
	return a.Authenticate(r)
}

// nodePrincipal is member id, authenticated by its node certificate or the
// cluster secret.
func nodePrincipal(id string) *Principal {
	return &Principal{Name: "node:" + id, Role: RoleOperator}
}

// refusal says why p may not make the request, or "" when it may.
func refusal(p *Principal, route Route) string {
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
	return a == ActionMembership || a == ActionTransfer || a == ActionSnapshot || a == ActionAdmin
}

func audit(log *slog.Logger, r *http.Request, route Route, p *Principal, status int) {
	who := "anonymous"
	if p != nil {
		who = p.Name
	}
	log.Info("audit", "who", who, "action", string(route.Action), "method", r.Method, "path", r.URL.Path,
		"remote", r.RemoteAddr, "status", status, "at", time.Now().UTC().Format(time.RFC3339Nano))
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
