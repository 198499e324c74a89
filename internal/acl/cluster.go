package acl

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/fencer-io/fencer/api/wire"
)

// A member's own credential is its member key (an Ed25519 key drawn in its
// data dir), whose public half the cluster records for it when it joins:
// it signs each request it makes of another member for that member's
// address (wire.AuthSchemeMember), and a node that checks the signature
// against the record makes it RoleNode for that id, and no other. The
// signature is useless anywhere else, and shows nothing of the key, so a
// member may send it where it would send nothing secret: to a member
// record an operator added (the members view asks every member).
//
// The cluster secret is what admits a node before it has a key recorded:
// a joiner, and a member of an older build, or one registered before
// every member could record keys. It is presented in the
// wire.AuthSchemeNode scheme, never as a bearer token, checked like a
// token (SHA-256 of both sides, compared in constant time), and makes the
// sender the node it names, but only a node without a key: once a member
// has one, the shared secret no longer speaks for it, so one member (or
// whoever copies its file) cannot claim another's id. An ACL file can
// grant it to no one: a token with the same secret, or the node role, is
// refused when the file is loaded.

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
	// ErrKeyedMember: the cluster secret names a member that has a key
	// of its own, which alone speaks for it.
	ErrKeyedMember = errors.New("this member id has a member key recorded: only its own signature (" + wire.AuthSchemeMember + ") speaks for it, not the cluster secret. " +
		"A member whose data dir (and member.key) was wiped or replaced must be removed first (fencer members remove ID), then started again (docs/security.md, rotation)")
	// ErrMalformedMemberSignature: the scheme is wire.AuthSchemeMember,
	// the rest is not "id=ID, at=MILLIS, sig=SIG".
	ErrMalformedMemberSignature = errors.New("malformed " + wire.AuthSchemeMember + " credentials: want id=ID, at=UNIX_MILLIS, sig=SIG")
	// ErrNoMemberKey: the signer has no key recorded here (not a member,
	// or one that registered none, or this node does not check keys).
	ErrNoMemberKey = errors.New("no member key is recorded for the signer on this node")
	// ErrBadMemberSignature: the signature is not the signer's for this
	// request to this node, now.
	ErrBadMemberSignature = errors.New("member signature does not verify for this request to this node (another key, another address or request, or a clock more than " + wire.MemberSignatureSkew.String() + " off)")
)

// Members is what a Store needs of the cluster to check members' own
// credentials: the key recorded for a member ("" for none).
type Members interface {
	MemberKey(id string) string
}

// memberView is the cluster's members and this node's own advertised
// address, the one signatures sent to it are made for.
type memberView struct {
	members Members
	self    string
}

// UseMembers makes the Store check member signatures against the keys m
// records and make the cluster secret speak only for members without one.
// self is this node's advertised HTTP address. Call it before serving.
func (s *Store) UseMembers(m Members, self string) {
	s.members.Store(&memberView{members: m, self: self})
}

// memberKey is the key recorded for id, "" without one or without members.
func (s *Store) memberKey(id string) string {
	if v := s.members.Load(); v != nil {
		return v.members.MemberKey(id)
	}
	return ""
}

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
	if strings.EqualFold(scheme, wire.AuthSchemeMember) {
		return s.authenticateMember(r, values[0])
	}
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
	if s.memberKey(id) != "" {
		return nil, ErrKeyedMember
	}
	// The leader can check this credential again: the request may be
	// forwarded with it.
	p := nodePrincipal(id)
	p.forwardable = true
	return p, nil
}

// authenticateMember checks a member's signature of the request against
// the key recorded for it, for this node's own address.
func (s *Store) authenticateMember(r *http.Request, value string) (*Principal, error) {
	sig, ok := wire.ParseMemberAuthorization(value)
	if !ok {
		return nil, ErrMalformedMemberSignature
	}
	v := s.members.Load()
	if v == nil {
		return nil, ErrNoMemberKey
	}
	pub, ok := wire.ParseMemberKey(v.members.MemberKey(sig.ID))
	if !ok {
		return nil, ErrNoMemberKey
	}
	uri := r.RequestURI
	if uri == "" {
		uri = r.URL.RequestURI()
	}
	now := time.Now()
	if !sig.Verify(pub, v.self, r.Method, uri, now) {
		return nil, ErrBadMemberSignature
	}
	if !s.replays.first(r, value, now) {
		return nil, fmt.Errorf("%w: this signed change was seen before (a replay)", ErrBadMemberSignature)
	}
	return nodePrincipal(sig.ID), nil
}
