package wire

import (
	"encoding/base64"
	"strings"
)

// AuthSchemeNode is the Authorization scheme with which a member presents
// the cluster secret to another member's API, for what members ask of each
// other (join, probe, remove) in a cluster that runs access control without
// TLS:
//
//	Authorization: Fencer-Node base64("ID:SECRET")
//
// It has Basic's layout (standard base64 with padding; ID is the sender's
// node id, which holds no colon) under its own name, so that it is never
// taken for a person's password and never confused with a bearer token.
const AuthSchemeNode = "Fencer-Node"

// NodeAuthorization is the Authorization value of member id presenting the
// cluster secret.
func NodeAuthorization(id, secret string) string {
	return AuthSchemeNode + " " + base64.StdEncoding.EncodeToString([]byte(id+":"+secret))
}

// ParseNodeAuthorization returns the node id and secret of an Authorization
// value in the AuthSchemeNode scheme (the scheme matched case-insensitively,
// one space before the credentials). ok is false for any other scheme, and
// for credentials that are not base64 of a valid node id, a colon and a
// non-empty secret.
func ParseNodeAuthorization(v string) (id, secret string, ok bool) {
	scheme, cred, found := strings.Cut(v, " ")
	if !found || !strings.EqualFold(scheme, AuthSchemeNode) {
		return "", "", false
	}
	// The decoder skips line breaks; a header value must not hold them.
	raw, err := base64.StdEncoding.Strict().DecodeString(cred)
	if err != nil || strings.ContainsAny(cred, "\r\n") {
		return "", "", false
	}
	id, secret, found = strings.Cut(string(raw), ":")
	if !found || !ValidNodeID(id) || secret == "" {
		return "", "", false
	}
	return id, secret, true
}
