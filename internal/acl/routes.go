package acl

import (
	"net/http"
	"strings"

	"github.com/fencer-io/fencer/api/wire"
)

// Route is how the ACL sees a request.
type Route struct {
	Action   Action
	Resource string // lock name or key, as the router will see it
	// FencingLocks are the Fencing-Lock values of a write: locks whose
	// current token the write compares with, so it reads them.
	FencingLocks []string
	// Open routes (health and readiness probes, the API's description)
	// need no token.
	Open bool
	// Session routes name no lock: the role is checked here, and the
	// session's holder against the principal's lock prefixes by the
	// handler, which alone knows it (SessionAllowed).
	Session bool
	// Names routes (a multi-lock's acquire, renew and release) name their
	// locks in the body or by the grant's token: the role is checked here,
	// and every name by the handler (NamesAllowed).
	Names bool
}

// Classify maps a request to its action and resource. It reads the path the
// way chi routes it (the raw path when the URL has one), so the name checked
// here is the name the handler gets. Anything it does not recognize is
// ActionAdmin.
//
// It is long because it is the table of routes to actions, one case each.
func Classify(r *http.Request) Route {
	path := r.URL.RawPath
	if path == "" {
		path = r.URL.Path
	}
	switch path {
	case "/healthz", "/readyz", "/v1/openapi.yaml":
		// The API's description is as open as the probes: it is the same
		// for every build and tells nothing of the cluster.
		return Route{Open: true}
	case "/metrics":
		return Route{Action: ActionStatus}
	}
	if path == "/ui" || strings.HasPrefix(path, "/ui/") {
		// The dashboard's files are the same for every build and hold no
		// data: the page asks for a token and then reads the API with it.
		return Route{Open: true}
	}
	seg := strings.Split(path, "/")
	if len(seg) < 3 || seg[0] != "" || seg[1] != "v1" {
		return Route{Action: ActionAdmin}
	}
	rest := seg[3:]
	if n := len(rest); n > 0 && rest[n-1] == "" {
		rest = rest[:n-1] // chi serves "/x/" like "/x" on mounted routers
	}
	switch seg[2] {
	case "locks", "semaphores":
		if seg[2] == "locks" && len(rest) == 1 && r.Method == http.MethodPost && isMultiRoute(rest[0]) {
			return multiRoute(rest[0])
		}
		// Semaphores follow a token's lock prefixes: the same actions on
		// names of their own namespace.
		return lockRoute(rest)
	case "sessions":
		return sessionRoute(r.Method, rest)
	case "kv":
		if len(seg) == 4 && seg[3] != "" {
			switch r.Method {
			case http.MethodGet, http.MethodHead:
				return Route{Action: ActionReadKey, Resource: seg[3]}
			case http.MethodDelete:
				return Route{Action: ActionDeleteKey, Resource: seg[3]}
			}
			return Route{Action: ActionWrite, Resource: seg[3], FencingLocks: r.Header.Values(wire.HeaderLock)}
		}
	case "cluster":
		return clusterRoute(r.Method, rest)
	case "whoami":
		// Every role may learn what it is.
		if len(rest) == 0 && r.Method == http.MethodGet {
			return Route{Action: ActionStatus}
		}
	case "events":
		// Any reader may watch; the stream leaves out what the principal
		// may not read (api's events handler asks Allow for each event).
		if len(rest) == 0 && r.Method == http.MethodGet {
			return Route{Action: ActionReadLock}
		}
	case "tokens":
		// Any reader may look a token up; a grant of a lock the
		// principal may not read is refused by api's token handler,
		// which alone knows the lock.
		if len(rest) == 1 && r.Method == http.MethodGet {
			return Route{Action: ActionReadLock}
		}
	case "debug":
		if len(seg) == 4 && seg[3] == "state" {
			return Route{Action: ActionStatus}
		}
	}
	return Route{Action: ActionAdmin}
}

func lockRoute(rest []string) Route {
	if len(rest) == 0 {
		return Route{Action: ActionReadLock}
	}
	name := rest[0]
	if name == "" || len(rest) > 2 {
		return Route{Action: ActionAdmin}
	}
	if len(rest) == 1 {
		return Route{Action: ActionReadLock, Resource: name}
	}
	switch rest[1] {
	case "acquire":
		return Route{Action: ActionAcquire, Resource: name}
	case "renew", "value":
		// Changing a held lock's value is, like renewing it, an act of
		// its holder.
		return Route{Action: ActionRenew, Resource: name}
	case "release":
		return Route{Action: ActionRelease, Resource: name}
	case "revoke":
		return Route{Action: ActionRevoke, Resource: name}
	case "check", "history":
		return Route{Action: ActionReadLock, Resource: name}
	}
	return Route{Action: ActionAdmin}
}

// isMultiRoute reports whether POST /v1/locks/{op} is a multi-lock's:
// a lock's own routes have its name and then the operation.
func isMultiRoute(op string) bool { return op == "acquire" || op == "renew" || op == "release" }

// multiRoute is POST /v1/locks/acquire, /renew and /release: the actions
// of a lock's, on every name of the multi-lock.
func multiRoute(op string) Route {
	action := map[string]Action{"acquire": ActionAcquire, "renew": ActionRenew, "release": ActionRelease}[op]
	return Route{Action: action, Names: true}
}

// sessionRoute is POST /v1/sessions (acquire), GET /v1/sessions[/{id}]
// (read-lock), POST /v1/sessions/{id}/renew, /close and /revoke (renew,
// release, revoke).
func sessionRoute(method string, rest []string) Route {
	switch {
	case len(rest) == 0 && method == http.MethodPost:
		return Route{Action: ActionAcquire, Session: true}
	case len(rest) <= 1 && (method == http.MethodGet || method == http.MethodHead):
		return Route{Action: ActionReadLock, Session: true}
	case len(rest) == 2 && rest[1] == "renew":
		return Route{Action: ActionRenew, Session: true}
	case len(rest) == 2 && rest[1] == "close":
		return Route{Action: ActionRelease, Session: true}
	case len(rest) == 2 && rest[1] == "revoke":
		return Route{Action: ActionRevoke, Session: true}
	}
	return Route{Action: ActionAdmin}
}

func clusterRoute(method string, rest []string) Route {
	switch strings.Join(rest, "/") {
	case "":
		return Route{Action: ActionStatus}
	case "join":
		return Route{Action: ActionJoin}
	case "members":
		if method == http.MethodGet {
			return Route{Action: ActionStatus} // each member's own status
		}
		return Route{Action: ActionMembership}
	case "leader/transfer":
		return Route{Action: ActionTransfer}
	case "snapshot", "restore":
		return Route{Action: ActionSnapshot}
	}
	if len(rest) == 2 && rest[0] == "members" && rest[1] != "" {
		return Route{Action: ActionMembership, Resource: rest[1]}
	}
	return Route{Action: ActionAdmin}
}
