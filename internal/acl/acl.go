// Package acl is fencer's access control: bearer tokens, each with a role and
// lock-name and key prefixes, loaded from a JSON file and reloadable without
// a restart.
//
// Why it is built this way:
//   - Secrets are compared in constant time against every token, with no exit
//     on the first match, after hashing both sides with SHA-256: equal-length
//     inputs mean the compare leaks neither which token matched nor a secret's
//     length.
//   - Access control sits in front of the whole API as one middleware that
//     maps each route to an action and a resource (routes.go), so handlers
//     stay unaware of it and an unknown route is operator-only: a new route
//     fails closed until it is classified.
//   - Prefixes scope reads as well as writes: a listing leaves out the locks
//     outside the principal's lock prefixes (LockVisible), and a fenced
//     write may name in Fencing-Lock only a lock within them, since the
//     answer tells whether the token is that lock's current one.
//   - A role never replaces the lease secret: renew and release still need it,
//     so a client can only ever end a lease it was given.
//   - Requests a follower forwards to the leader keep their Authorization
//     header (the forwarder copies it back even when the client names it in
//     Connection, which would make a proxy drop it), and the leader checks
//     it again against its own copy of the file. Every node must therefore be
//     given the same ACL file.
//   - Members are not in the file: they prove they are members by their node
//     certificate (TLS), their signature with their own member key, or, for
//     an id with no key recorded, the cluster secret (cluster.go), never by
//     a token, so an ACL file cannot make anyone a node. Each credential
//     makes the sender one node only, the one it proves, so one member
//     cannot act as another (cluster/DESIGN.md says why a signature).
//   - A member is a node, not an operator: it may join, read the status and
//     remove itself (RoleNode), the requests members make of each other. A request another member forwarded is never served with the
//     forwarding member's rights, nor as anyone that member names: it
//     carries its client's bearer token, or, for a node's own request, that
//     node (wire.HeaderForwardedPrincipal), believed only from that node's
//     own certificate.
//
// The file:
//
//	{"tokens": [
//	  {"name": "ci",  "secret": "…", "role": "client", "locks": ["jobs."], "keys": ["jobs."]},
//	  {"name": "ops", "secret": "…", "role": "operator"},
//	  {"name": "dash","secret": "…", "role": "reader"}
//	]}
//
// Prefixes use the alphabet of lock names and keys (wire.ValidNamePrefix; a
// "/" could never match one); "*" means every name. An absent or empty
// "locks" list means every lock; an absent or empty "keys" list means no
// key: a token scoped to its locks must not read or overwrite the fenced
// keys of others (it once could: "no prefixes" was read as "all"). Parse
// warns of each token without "keys", which relied on that reading.
package acl

import (
	"bytes"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"regexp"
	"strings"

	"github.com/fencer-io/fencer/api/wire"
)

// Role is what a token may do.
type Role string

// Roles, each including the rights of the one before.
const (
	// RoleReader reads: lock status, checks, keys, cluster status.
	RoleReader Role = "reader"
	// RoleClient also acquires, renews and releases locks and writes fenced
	// keys, within its prefixes.
	RoleClient Role = "client"
	// RoleOperator also changes membership, transfers leadership, and saves
	// and restores snapshots.
	RoleOperator Role = "operator"
	// RoleNode is a cluster member, authenticated by its node certificate or
	// the cluster secret. It may only do what members ask of each other:
	// join, read the cluster's status, and remove itself. An ACL file cannot
	// grant it.
	RoleNode Role = "node"
)

// MinSecretLen is the shortest secret the file may hold.
const MinSecretLen = 16

// Principal is an authenticated caller.
type Principal struct {
	Name string
	Role Role
	// Locks and Keys are name prefixes, "*" every name. No Locks means
	// every lock; no Keys means no key.
	Locks []string
	Keys  []string
	// Node is the member id of a RoleNode principal.
	Node string
	// forwardable: the leader can check the credential again when a
	// follower forwards the request (a bearer token, the cluster secret).
	// A node's certificate or signature is this node's to check: the
	// leader would see the follower's certificate, or a signature made
	// for another address (Forwardable).
	forwardable bool
}

// Forwardable reports whether a follower may forward p's request to the
// leader, which checks the credential again. A node's own certificate or
// signature proves who sent the request only to the node it was sent to,
// and the leader believes no member's word for another (F8): such a
// request must be sent to the leader itself.
func (p *Principal) Forwardable() bool { return p.Role != RoleNode || p.forwardable }

// ACL is a loaded token file. It is immutable; Store swaps whole ACLs.
type ACL struct {
	tokens []token
	// warnings are what an operator should know of the file (Warnings).
	warnings []string
}

// AllNames is the prefix list entry that matches every lock name or key.
const AllNames = "*"

// Warnings says what in the file changed meaning with this build: tokens
// without a "keys" entry, which now may read and write no key.
func (a *ACL) Warnings() []string { return a.warnings }

type token struct {
	sum       [sha256.Size]byte // SHA-256 of the secret
	principal *Principal
}

// tokenFile is the JSON file.
type tokenFile struct {
	Tokens []tokenEntry `json:"tokens"`
}

type tokenEntry struct {
	Name   string   `json:"name"`
	Secret string   `json:"secret"`
	Role   Role     `json:"role"`
	Locks  []string `json:"locks,omitempty"`
	Keys   []string `json:"keys,omitempty"`
}

// Errors of Authenticate. Each one is answered 401.
var (
	// ErrNoCredentials: the request carries no Authorization header.
	ErrNoCredentials = errors.New("no bearer token: send Authorization: Bearer TOKEN")
	// ErrMalformedCredentials: the header is not one "Bearer TOKEN".
	ErrMalformedCredentials = errors.New("malformed Authorization header: want Bearer TOKEN")
	// ErrUnknownToken: no token in the ACL has this secret.
	ErrUnknownToken = errors.New("unknown bearer token")
)

// b64token is RFC 6750's token syntax; secrets must be sendable as one.
var b64token = regexp.MustCompile(`^[A-Za-z0-9\-._~+/]+=*$`)

// Load reads and validates an ACL file.
func Load(path string) (*ACL, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("acl file: %w", err)
	}
	a, err := Parse(data)
	if err != nil {
		return nil, fmt.Errorf("acl file %s: %w", path, err)
	}
	return a, nil
}

// Parse validates an ACL file's contents: unknown fields, duplicate names or
// secrets, short secrets, unknown roles and prefixes that could never match
// are all refused, so a typo never silently widens or narrows access.
func Parse(data []byte) (*ACL, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var f tokenFile
	if err := dec.Decode(&f); err != nil {
		return nil, fmt.Errorf("parse: %w", err)
	}
	if dec.More() {
		return nil, errors.New("parse: trailing data after the JSON object")
	}
	if len(f.Tokens) == 0 {
		return nil, errors.New("no tokens: an empty ACL would refuse every request")
	}
	a := &ACL{}
	names, secrets := map[string]bool{}, map[[sha256.Size]byte]bool{}
	for i, e := range f.Tokens {
		if e.Name == "" || names[e.Name] {
			return nil, fmt.Errorf("token %d: name %q is empty or used twice", i, e.Name)
		}
		names[e.Name] = true
		if len(e.Secret) < MinSecretLen || !b64token.MatchString(e.Secret) {
			return nil, fmt.Errorf("token %q: secret must be at least %d characters of [A-Za-z0-9-._~+/] (try: openssl rand -hex 32)", e.Name, MinSecretLen)
		}
		sum := sha256.Sum256([]byte(e.Secret))
		if secrets[sum] {
			return nil, fmt.Errorf("token %q: secret is used by another token", e.Name)
		}
		secrets[sum] = true
		switch e.Role {
		case RoleReader, RoleClient, RoleOperator:
		case RoleNode:
			return nil, fmt.Errorf("token %q: role node is reserved for cluster members, which present their certificate or the cluster secret", e.Name)
		default:
			return nil, fmt.Errorf("token %q: role %q: want reader, client or operator", e.Name, e.Role)
		}
		for _, p := range append(append([]string(nil), e.Locks...), e.Keys...) {
			if p != AllNames && !wire.ValidNamePrefix(p) {
				return nil, fmt.Errorf("token %q: prefix %q: want 1-%d of %s, the characters of lock names and keys", e.Name, p, wire.MaxNameLen, wire.NameChars)
			}
		}
		if len(e.Keys) == 0 {
			a.warnings = append(a.warnings, fmt.Sprintf("token %q has no \"keys\" entry: it may read and write no fenced key (before this build an absent list meant every key); "+
				"add \"keys\": [\"*\"] for every key, or the prefixes it needs", e.Name))
		}
		a.tokens = append(a.tokens, token{sum: sum, principal: &Principal{Name: e.Name, Role: e.Role, Locks: e.Locks, Keys: e.Keys, forwardable: true}})
	}
	return a, nil
}

// compare is subtle.ConstantTimeCompare; a variable so that a test can prove
// every lookup goes through it.
var compare = subtle.ConstantTimeCompare

// ParseBearer extracts the token of an "Authorization: Bearer TOKEN" value.
// The scheme is case-insensitive; exactly one space separates it from a
// token of RFC 6750 syntax.
func ParseBearer(header string) (string, bool) {
	const scheme = "bearer "
	if len(header) <= len(scheme) || !strings.EqualFold(header[:len(scheme)], scheme) {
		return "", false
	}
	tok := header[len(scheme):]
	if !b64token.MatchString(tok) {
		return "", false
	}
	return tok, true
}

// Authenticate returns the principal of the request's bearer token.
func (a *ACL) Authenticate(r *http.Request) (*Principal, error) {
	values := r.Header.Values("Authorization")
	if len(values) == 0 {
		return nil, ErrNoCredentials
	}
	if len(values) > 1 {
		return nil, ErrMalformedCredentials
	}
	secret, ok := ParseBearer(values[0])
	if !ok {
		return nil, ErrMalformedCredentials
	}
	if p := a.lookup(secret); p != nil {
		return p, nil
	}
	return nil, ErrUnknownToken
}

// lookup compares the secret's hash with every token's, always all of them,
// and selects the match without branching on it.
func (a *ACL) lookup(secret string) *Principal {
	sum := sha256.Sum256([]byte(secret))
	match := -1
	for i := range a.tokens {
		eq := compare(sum[:], a.tokens[i].sum[:])
		match = subtle.ConstantTimeSelect(eq, i, match)
	}
	if match < 0 {
		return nil
	}
	return a.tokens[match].principal
}
