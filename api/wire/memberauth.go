package wire

import (
	"crypto/ed25519"
	"encoding/base64"
	"strconv"
	"strings"
	"time"
)

// AuthSchemeMember is the Authorization scheme with which a member signs a
// request to another member with its own member key (an Ed25519 key drawn
// in its data dir, whose public half the cluster records for it at join):
//
//	Authorization: Fencer-Member id=ID, at=UNIX_MILLIS, sig=BASE64URL
//
// The signature covers MemberSigned: the sender, the host:port it sent to,
// the method, the request URI and the time. It is useless to whoever
// receives it anywhere but at that address, within MemberSignatureSkew, and
// it reveals nothing of the key, so a member sends it even to an address it
// has no reason to trust (a member record an operator added).
const AuthSchemeMember = "Fencer-Member"

// MemberSignatureSkew is how far a signature's time may be from the
// receiver's clock, either way: the members' clocks must agree this well.
const MemberSignatureSkew = 5 * time.Minute

// MemberKeyString is the text form of a member's public key, as recorded
// and sent in HeaderMemberKey: base64url without padding.
func MemberKeyString(pub ed25519.PublicKey) string {
	return base64.RawURLEncoding.EncodeToString(pub)
}

// ParseMemberKey reads MemberKeyString's form.
func ParseMemberKey(s string) (ed25519.PublicKey, bool) {
	b, err := base64.RawURLEncoding.Strict().DecodeString(s)
	if err != nil || len(b) != ed25519.PublicKeySize {
		return nil, false
	}
	return ed25519.PublicKey(b), true
}

// MemberSigned is what a member signs for a request: a fixed label, then
// one line each for the sender's id, the host:port the request is sent to,
// the method, the request URI (path and query, as sent) and the time in
// Unix milliseconds.
func MemberSigned(id, host, method, uri string, atMillis int64) []byte {
	return []byte("fencer-member-request-v1\n" + id + "\n" + host + "\n" + method + "\n" + uri + "\n" + strconv.FormatInt(atMillis, 10))
}

// MemberAuthorization is the Authorization value with which member id signs
// a request to host.
func MemberAuthorization(key ed25519.PrivateKey, id, host, method, uri string, at time.Time) string {
	ms := at.UnixMilli()
	sig := ed25519.Sign(key, MemberSigned(id, host, method, uri, ms))
	return AuthSchemeMember + " id=" + id + ", at=" + strconv.FormatInt(ms, 10) + ", sig=" + base64.RawURLEncoding.EncodeToString(sig)
}

// MemberSignature is a parsed AuthSchemeMember credential.
type MemberSignature struct {
	ID       string
	AtMillis int64
	Sig      []byte
}

// ParseMemberAuthorization reads an AuthSchemeMember value (the scheme
// matched case-insensitively). ok is false for any other scheme and for a
// value that is not exactly id, at and sig, in that order.
func ParseMemberAuthorization(v string) (MemberSignature, bool) {
	scheme, params, found := strings.Cut(v, " ")
	if !found || !strings.EqualFold(scheme, AuthSchemeMember) || strings.ContainsAny(params, "\r\n") {
		return MemberSignature{}, false
	}
	parts := strings.Split(params, ", ")
	if len(parts) != 3 {
		return MemberSignature{}, false
	}
	id, ok1 := strings.CutPrefix(parts[0], "id=")
	at, ok2 := strings.CutPrefix(parts[1], "at=")
	sig, ok3 := strings.CutPrefix(parts[2], "sig=")
	if !ok1 || !ok2 || !ok3 || !ValidNodeID(id) {
		return MemberSignature{}, false
	}
	ms, err := strconv.ParseInt(at, 10, 64)
	raw, err2 := base64.RawURLEncoding.Strict().DecodeString(sig)
	if err != nil || err2 != nil || len(raw) != ed25519.SignatureSize {
		return MemberSignature{}, false
	}
	return MemberSignature{ID: id, AtMillis: ms, Sig: raw}, true
}

// Verify reports whether s is pub's signature of a request to host with
// method and uri, made within MemberSignatureSkew of now.
func (s MemberSignature) Verify(pub ed25519.PublicKey, host, method, uri string, now time.Time) bool {
	at := time.UnixMilli(s.AtMillis)
	if at.Before(now.Add(-MemberSignatureSkew)) || at.After(now.Add(MemberSignatureSkew)) {
		return false
	}
	return ed25519.Verify(pub, MemberSigned(s.ID, host, method, uri, s.AtMillis), s.Sig)
}
