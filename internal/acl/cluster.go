package acl

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"

	"github.com/fencer-io/fencer/api/wire"
)

// The cluster secret is the members' own credential where no TLS gives them
// node certificates: with access control on, the joins, probes and removals
// members send each other would otherwise carry nothing and be refused
// forever. A member presents it in the wire.AuthSchemeNode scheme, never as
// a bearer token, and it is checked like a token (SHA-256 of both sides,
// compared in constant time). It makes the sender the node it names, the
// same principal a node certificate makes: the name is the sender's claim,
// for the audit log, since every member holds the same secret. An ACL file
// can grant it to no one: a token with the same secret, or the node role,
// is refused when the file is loaded.

// MinClusterSecretLen is the shortest cluster secret accepted.
const MinClusterSecretLen = 32

// Errors of a request that presents a member's credential. Each is
// answered 401.
var (
	// ErrNoClusterSecret: this node was given no cluster secret.
	ErrNoClusterSecret = errors.New("a member's credential (" + wire.AuthSchemeNode + "), but this node has no cluster secret: give every node the same --cluster-secret-file")
	// ErrWrongClusterSecret: the secret is not this node's.
	ErrWrongClusterSecret = errors.New("wrong cluster secret: every node must be given the same --cluster-secret-file")
	// ErrMalformedNodeCredentials: the scheme is wire.AuthSchemeNode, the
	// rest is not base64 of "ID:SECRET".
	ErrMalformedNodeCredentials = errors.New("malformed " + wire.AuthSchemeNode + " credentials: want base64 of ID:SECRET")
)

// ReadClusterSecret reads a cluster secret file: one line of at least
// MinClusterSecretLen characters of [A-Za-z0-9-._~+/=], surrounding
// whitespace ignored.
func ReadClusterSecret(path string) (string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("cluster secret file: %w", err)
	}
	secret := strings.TrimSpace(string(data))
	if len(secret) < MinClusterSecretLen || !b64token.MatchString(secret) {
		return "", fmt.Errorf("cluster secret file %s: want one line of at least %d characters of [A-Za-z0-9-._~+/] (try: openssl rand -hex 32 > %s)",
			path, MinClusterSecretLen, path)
	}
	return secret, nil
}

// StoreOption configures a Store.
type StoreOption func(*Store)

// WithClusterSecret makes the Store accept members that present secret
// (wire.AuthSchemeNode) as the node they name, and refuse any ACL file that
// gives a token the same secret.
func WithClusterSecret(secret string) StoreOption {
	return func(s *Store) {
		sum := sha256.Sum256([]byte(secret))
		s.cluster = &sum
	}
}

// checkReserved refuses an ACL that grants the cluster secret to a token.
func (s *Store) checkReserved(a *ACL) error {
	if s.cluster == nil {
		return nil
	}
	for _, t := range a.tokens {
		if compare(t.sum[:], s.cluster[:]) == 1 {
			return fmt.Errorf("token %q: its secret is the cluster secret, which only members may present: give the token another one", t.principal.Name)
		}
	}
	return nil
}

// authenticate returns the principal of a request: the node it names, when
// it presents a member's credential, else what the ACL in force says.
func (s *Store) authenticate(r *http.Request, nodeCerts bool) (*Principal, error) {
	values := r.Header.Values("Authorization")
	if len(values) != 1 {
		return authenticate(s.ACL(), r, nodeCerts)
	}
	scheme, _, _ := strings.Cut(values[0], " ")
	if !strings.EqualFold(scheme, wire.AuthSchemeNode) {
		return authenticate(s.ACL(), r, nodeCerts)
	}
	id, secret, ok := wire.ParseNodeAuthorization(values[0])
	switch {
	case !ok:
		return nil, ErrMalformedNodeCredentials
	case s.cluster == nil:
		return nil, ErrNoClusterSecret
	}
	sum := sha256.Sum256([]byte(secret))
	if compare(sum[:], s.cluster[:]) != 1 {
		return nil, ErrWrongClusterSecret
	}
	return nodePrincipal(id), nil
}
