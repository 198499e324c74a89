package acl

import (
	"context"
	"strings"
)

// Action is what a request does, as the ACL sees it.
type Action string

// Actions. Lock actions are scoped by a principal's lock prefixes, key
// actions by its key prefixes; the others have no resource.
const (
	ActionAcquire  Action = "acquire"   // POST /v1/locks/{name}/acquire
	ActionRenew    Action = "renew"     // POST /v1/locks/{name}/renew
	ActionRelease  Action = "release"   // POST /v1/locks/{name}/release
	ActionReadLock Action = "read-lock" // GET /v1/locks[/{name}[/check]]
	ActionWrite    Action = "write"     // PUT /v1/kv/{key}
	ActionReadKey  Action = "read-key"  // GET /v1/kv/{key}
	// ActionDeleteKey removes a key and its mark, which lets a stale token
	// write again: operators only, audited.
	ActionDeleteKey Action = "delete-key" // DELETE /v1/kv/{key}
	// ActionRevoke ends another's grant or session (POST
	// /v1/locks|semaphores/{name}/revoke, /v1/sessions/{id}/revoke):
	// operators only, audited, scoped by lock prefixes as a lock's actions.
	ActionRevoke     Action = "revoke"
	ActionStatus     Action = "status"     // GET /v1/cluster, /v1/debug/state, /metrics
	ActionJoin       Action = "join"       // POST /v1/cluster/join
	ActionMembership Action = "membership" // add and remove members
	ActionTransfer   Action = "transfer"   // POST /v1/cluster/leader/transfer
	ActionSnapshot   Action = "snapshot"   // snapshot save and restore
	// ActionAdmin is every route this package does not know: operators only,
	// so that a route added to the API fails closed until it is classified.
	ActionAdmin Action = "admin"
)

// rights lists each role's actions.
var rights = map[Role]map[Action]bool{
	RoleReader: {ActionReadLock: true, ActionReadKey: true, ActionStatus: true},
	RoleClient: {
		ActionReadLock: true, ActionReadKey: true, ActionStatus: true,
		ActionAcquire: true, ActionRenew: true, ActionRelease: true, ActionWrite: true,
	},
	RoleOperator: {
		ActionReadLock: true, ActionReadKey: true, ActionStatus: true,
		ActionAcquire: true, ActionRenew: true, ActionRelease: true, ActionWrite: true,
		ActionJoin: true, ActionMembership: true, ActionTransfer: true, ActionSnapshot: true, ActionAdmin: true,
		ActionDeleteKey: true, ActionRevoke: true,
	},
	RoleNode: {ActionStatus: true, ActionJoin: true, ActionMembership: true},
}

// Allow reports whether p may perform action on resource (a lock name for
// lock actions, a key for key actions, the member id when removing a
// member, "" otherwise). A lock or key outside
// the principal's prefixes is refused for every role. Listing locks
// (ActionReadLock on "") is allowed to any reader; the API leaves out of the
// list what LockVisible refuses.
func Allow(p *Principal, action Action, resource string) bool {
	if p == nil || !rights[p.Role][action] {
		return false
	}
	switch action {
	case ActionAcquire, ActionRenew, ActionRelease, ActionRevoke:
		return inScope(p.Locks, resource)
	case ActionReadLock:
		return resource == "" || inScope(p.Locks, resource)
	case ActionWrite, ActionReadKey, ActionDeleteKey:
		return len(p.Keys) > 0 && inScope(p.Keys, resource) // no keys: none

	case ActionMembership:
		return p.Role != RoleNode || resource == p.Node // a node removes only itself
	}
	return true
}

// may reports whether p's role has action, whatever the resource.
func (p *Principal) may(action Action) bool { return p != nil && rights[p.Role][action] }

// SessionAllowed reports whether the principal of ctx may perform action
// (acquire: create; renew; release: close; read-lock: see) on a session
// whose holder is holder: the holder's name is checked against the
// principal's lock prefixes, as a lock's name is. Always true when no ACL
// authenticated the request.
func SessionAllowed(ctx context.Context, action Action, holder string) bool {
	p, ok := PrincipalFrom(ctx)
	if !ok {
		return true
	}
	if !p.may(action) {
		return false
	}
	return inScope(p.Locks, holder)
}

// NamesAllowed returns the first of names on which the principal of ctx
// may not perform action (a multi-lock's every name is checked as a lock's
// name is), and false; "" and true when it may on all, or when no ACL
// authenticated the request.
func NamesAllowed(ctx context.Context, action Action, names []string) (string, bool) {
	p, ok := PrincipalFrom(ctx)
	if !ok {
		return "", true
	}
	for _, n := range names {
		if !Allow(p, action, n) {
			return n, false
		}
	}
	return "", true
}

func inScope(prefixes []string, name string) bool {
	if name == "" {
		return false
	}
	if len(prefixes) == 0 {
		return true
	}
	for _, p := range prefixes {
		if p == AllNames || strings.HasPrefix(name, p) {
			return true
		}
	}
	return false
}

// LockVisible reports whether the principal of ctx may see the lock name in
// a listing: always when no ACL authenticated the request.
func LockVisible(ctx context.Context, name string) bool {
	p, ok := PrincipalFrom(ctx)
	return !ok || Allow(p, ActionReadLock, name)
}
