// Package request reads what a client sends the API: a JSON body decoded
// strictly (refusing what encoding/json would quietly accept), the route's
// name and key parameters, its query parameters (a token, where a watch
// starts, a blocking read's wait), and the checks of each body's fields and
// of a member's addresses. Each refusal is a *wire.Error with its code.
package request

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strings"
	"unicode/utf8"

	"github.com/go-chi/chi/v5"

	"github.com/fencer-io/fencer/api/wire"
)

// MaxHolderLen bounds a holder, in bytes. Names and keys share one alphabet
// (wire.ValidName).
const MaxHolderLen = 200

// CheckName refuses a lock, semaphore or key name outside wire.ValidName.
func CheckName(s string) error {
	if !wire.ValidName(s) {
		return nameError(s)
	}
	return nil
}

func nameError(shown string) error {
	return badRequest(wire.CodeInvalidName, fmt.Sprintf("lock name %.64q: want %s", shown, wire.NameRule))
}

func keyError(shown string) error {
	return badRequest(wire.CodeInvalidKey, fmt.Sprintf("key %.64q: want %s", shown, wire.NameRule))
}

// LockName and KeyName return the {name} and {key} route parameters,
// checked. chi matches the escaped path when the request had escapes, so an
// invalid name is checked as sent but shown unescaped, as its sender wrote
// it: "a/b", not "a%2Fb".
func LockName(r *http.Request) (string, error) { return routeParam(r, "name", nameError) }
func KeyName(r *http.Request) (string, error)  { return routeParam(r, "key", keyError) }

func routeParam(r *http.Request, param string, invalid func(shown string) error) (string, error) {
	s := chi.URLParam(r, param)
	if wire.ValidName(s) {
		return s, nil
	}
	if r.URL.RawPath != "" {
		if u, err := url.PathUnescape(s); err == nil {
			s = u
		}
	}
	return "", invalid(s)
}

// Printable reports whether s is non-empty, at most max bytes, valid UTF-8,
// and free of characters that do not show: two holders that print alike
// must be the same holder.
func Printable(s string, max int) bool {
	if s == "" || len(s) > max || !utf8.ValidString(s) {
		return false
	}
	for _, r := range s {
		if invisible(r) {
			return false
		}
	}
	return true
}

// invisible reports whether r is a control character (C0, DEL, C1), a
// bidirectional embedding, override or isolate, a line or paragraph
// separator, or a zero-width character.
func invisible(r rune) bool {
	switch {
	case r < 0x20, 0x7f <= r && r <= 0x9f:
	case 0x200b <= r && r <= 0x200f: // zero-width space, non-joiner, joiner; LRM, RLM
	case 0x202a <= r && r <= 0x202e: // bidi embeddings and overrides
	case 0x2066 <= r && r <= 0x2069: // bidi isolates
	case r == 0x2028, r == 0x2029, r == 0xfeff: // separators; zero-width no-break space
	default:
		return false
	}
	return true
}

// ValidateAcquire checks an acquire body. Its TTL must be in range: the
// default for a body without ttl_ms is filled in as it is read
// (NamedAcquire), so an explicit 0 here is refused, as the CLI's --ttl 0 is.
func ValidateAcquire(r *wire.AcquireRequest) error {
	if !Printable(r.Holder, MaxHolderLen) {
		return badRequest(wire.CodeInvalidHolder, "holder: want 1-200 bytes of Printable UTF-8 (no control, bidi, separator or zero-width characters)")
	}
	if r.Session != 0 || r.SessionLease != "" {
		if err := checkUnderSession(r.Session, r.SessionLease, r.TTLMillis); err != nil {
			return err
		}
	} else if err := CheckTTL(r.TTLMillis); err != nil {
		return err
	}
	if r.WaitMs < 0 || r.WaitMs > wire.MaxWait.Milliseconds() {
		return badRequest(wire.CodeInvalidWait, fmt.Sprintf("wait_ms %d: want 0 to %d", r.WaitMs, wire.MaxWait.Milliseconds()))
	}
	// At least 16 characters, so that one caller cannot guess another's.
	if r.RequestID != "" && (!Printable(r.RequestID, wire.MaxRequestIDLen) || utf8.RuneCountInString(r.RequestID) < wire.MinRequestIDLen) {
		return badRequest(wire.CodeInvalidRequestID, fmt.Sprintf("request_id: want %d to %d Printable characters (the Go client and the CLI send 32 random hex digits)", wire.MinRequestIDLen, wire.MaxRequestIDLen))
	}
	if err := checkDurable(r.Durable, r.WaitMs, r.RequestID); err != nil {
		return err
	}
	if err := CheckValue(r.Value); err != nil {
		return err
	}
	if r.LockDelayMillis < 0 || r.LockDelayMillis > wire.MaxLockDelay.Milliseconds() {
		return badRequest(wire.CodeInvalidLockDelay, fmt.Sprintf("lock_delay_ms %d: want 0 to %d", r.LockDelayMillis, wire.MaxLockDelay.Milliseconds()))
	}
	switch r.Mode {
	case "", wire.ModeExclusive:
	case wire.ModeShared:
		if r.Value != "" {
			// Only the exclusive grant publishes (an election's leader).
			return badRequest(wire.CodeInvalidMode, "mode shared: a shared grant publishes no value; leave value out")
		}
	default:
		return badRequest(wire.CodeInvalidMode, fmt.Sprintf("mode %q: want %q or %q (absent: exclusive)", r.Mode, wire.ModeShared, wire.ModeExclusive))
	}
	return nil
}

// checkDurable refuses a durable wait without a wait (it would never
// queue) or without a request id (its caller could never find its place
// again).
func checkDurable(durable bool, waitMs int64, requestID string) error {
	switch {
	case !durable:
	case waitMs <= 0:
		return badRequest(wire.CodeInvalidWait, "durable: a durable waiter keeps its place for wait_ms after each ask; give wait_ms > 0")
	case requestID == "":
		return badRequest(wire.CodeInvalidRequestID, "durable: a durable waiter is found again by its request_id; give one (the Go client and the CLI send 32 random hex digits)")
	}
	return nil
}

// CheckTTL refuses a lease length out of range (a lock's, a permit's, a
// session's).
func CheckTTL(ms int64) error {
	// Compare in milliseconds: converting first could overflow into range.
	if ms < wire.MinTTL.Milliseconds() || ms > wire.MaxTTL.Milliseconds() {
		return badRequest(wire.CodeInvalidTTL, fmt.Sprintf("ttl_ms %d: want %d to %d, or leave ttl_ms out for the default %d",
			ms, wire.MinTTL.Milliseconds(), wire.MaxTTL.Milliseconds(), wire.DefaultTTL.Milliseconds()))
	}
	return nil
}

// checkUnderSession checks an acquire under a session: its id and secret,
// and no TTL of its own (it takes the session's).
func checkUnderSession(id uint64, secret string, ttl int64) error {
	switch {
	case id == 0:
		return badRequest(wire.CodeInvalidToken, "session: want the session id returned by POST /v1/sessions with session_lease")
	case len(secret) != wire.LeaseSecretLen:
		return badRequest(wire.CodeInvalidLease, fmt.Sprintf("session_lease: want the %d-character secret returned by POST /v1/sessions", wire.LeaseSecretLen))
	case ttl != 0:
		return badRequest(wire.CodeInvalidTTL, "ttl_ms: a grant under a session lives as long as the session; leave ttl_ms out")
	}
	return nil
}

// ValidateSession checks a session's creation body.
func ValidateSession(r *wire.SessionRequest) error {
	lock := wire.AcquireRequest{Holder: r.Holder, TTLMillis: r.TTLMillis, RequestID: r.RequestID, LockDelayMillis: r.LockDelayMillis}
	return ValidateAcquire(&lock)
}

// ValidateSessionLease checks a session renew or close body.
func ValidateSessionLease(r *wire.SessionLeaseRequest) error {
	if len(r.Lease) != wire.LeaseSecretLen {
		return badRequest(wire.CodeInvalidLease, fmt.Sprintf("lease: want the %d-character secret returned by POST /v1/sessions", wire.LeaseSecretLen))
	}
	return nil
}

// ValidateLease checks a renew or release body: the secret and token of a grant.
func ValidateLease(r *wire.LeaseRequest) error {
	if len(r.Lease) != wire.LeaseSecretLen {
		return badRequest(wire.CodeInvalidLease, fmt.Sprintf("lease: want the %d-character secret returned by acquire", wire.LeaseSecretLen))
	}
	if r.Token == 0 {
		return badRequest(wire.CodeInvalidToken, "token: want the token returned by acquire")
	}
	return nil
}

// ValidateSemAcquire checks a semaphore acquire body as an acquire's, and
// its limit.
func ValidateSemAcquire(r *wire.SemAcquireRequest) error {
	lock := wire.AcquireRequest{Holder: r.Holder, TTLMillis: r.TTLMillis, WaitMs: r.WaitMs, RequestID: r.RequestID, LockDelayMillis: r.LockDelayMillis,
		Session: r.Session, SessionLease: r.SessionLease, Durable: r.Durable}
	if err := ValidateAcquire(&lock); err != nil {
		return err
	}
	r.TTLMillis = lock.TTLMillis
	if r.Limit < 1 || r.Limit > wire.MaxSemaphoreLimit {
		return badRequest(wire.CodeInvalidLimit, fmt.Sprintf("limit %d: want 1 to %d", r.Limit, wire.MaxSemaphoreLimit))
	}
	return nil
}

// ValidateValue checks a body that changes a held lock's value: the
// grant's secret and token, and the value.
func ValidateValue(r *wire.ValueRequest) error {
	if err := ValidateLease(&wire.LeaseRequest{Lease: r.Lease, Token: r.Token}); err != nil {
		return err
	}
	return CheckValue(r.Value)
}

// NamedBody reads a request to a {name} route with a JSON body: the name,
// checked, and the body decoded strictly into a T and checked by check.
func NamedBody[T any](w http.ResponseWriter, r *http.Request, check func(*T) error) (string, T, error) {
	return namedBody(w, r, nil, check)
}

// NamedAcquire is NamedBody for a lock acquire, with the default TTL for a
// body that has no ttl_ms (or null): only an absent TTL defaults. A
// "ttl_ms":0 that became 10 s without a word hid a caller's mistake (a TTL
// computed as 0, a unit lost), where the CLI refuses --ttl 0.
func NamedAcquire(w http.ResponseWriter, r *http.Request) (string, wire.AcquireRequest, error) {
	return namedBody(w, r, func(raw []byte, b *wire.AcquireRequest) {
		if !ttlGiven(raw) && b.Session == 0 {
			b.TTLMillis = wire.DefaultTTL.Milliseconds()
		}
	}, ValidateAcquire)
}

// NamedSemAcquire is NamedAcquire for a semaphore acquire.
func NamedSemAcquire(w http.ResponseWriter, r *http.Request) (string, wire.SemAcquireRequest, error) {
	return namedBody(w, r, func(raw []byte, b *wire.SemAcquireRequest) {
		if !ttlGiven(raw) && b.Session == 0 {
			b.TTLMillis = wire.DefaultTTL.Milliseconds()
		}
	}, ValidateSemAcquire)
}

// SessionBody reads a session's creation body, with the default TTL for a
// body without ttl_ms, as an acquire's.
func SessionBody(w http.ResponseWriter, r *http.Request) (wire.SessionRequest, error) {
	var body wire.SessionRequest
	raw, err := decodeJSON(w, r, &body)
	if err != nil {
		return body, err
	}
	if !ttlGiven(raw) {
		body.TTLMillis = wire.DefaultTTL.Milliseconds()
	}
	return body, ValidateSession(&body)
}

// ttlGiven reports whether a body, already decoded strictly, sets ttl_ms.
// The wire types hold a plain int64, where absent and 0 look alike.
func ttlGiven(raw []byte) bool {
	var ttl struct {
		TTLMillis *int64 `json:"ttl_ms"`
	}
	return json.Unmarshal(raw, &ttl) == nil && ttl.TTLMillis != nil
}

// namedBody reads the name and the body, lets fill (if any) complete the
// body from the raw JSON, then checks it.
func namedBody[T any](w http.ResponseWriter, r *http.Request, fill func(raw []byte, body *T), check func(*T) error) (string, T, error) {
	var body T
	name, err := LockName(r)
	var raw []byte
	if err == nil {
		raw, err = decodeJSON(w, r, &body)
	}
	if err == nil && fill != nil {
		fill(raw, &body)
	}
	if err == nil {
		err = check(&body)
	}
	return name, body, err
}

// DecodeJSON reads a JSON body strictly: sent as application/json, then
// size-capped, then checked by
// strictJSON (one object, exact field names, no duplicate keys, valid UTF-8),
// then decoded with unknown fields and trailing data refused.
func DecodeJSON(w http.ResponseWriter, r *http.Request, v any) error {
	_, err := decodeJSON(w, r, v)
	return err
}

// decodeJSON is DecodeJSON, returning the body it read.
func decodeJSON(w http.ResponseWriter, r *http.Request, v any) ([]byte, error) {
	if err := checkJSONType(r.Header); err != nil {
		return nil, err
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, wire.MaxBodyBytes))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return nil, &wire.Error{Code: wire.CodeBodyTooLarge, Message: fmt.Sprintf("request body exceeds %d bytes", wire.MaxBodyBytes)}
		}
		return nil, badRequest(wire.CodeInvalidJSON, "reading request body: "+err.Error())
	}
	if len(bytes.TrimSpace(body)) == 0 {
		return nil, badRequest(wire.CodeInvalidJSON, "request body is empty; want a JSON object")
	}
	if err := strictJSON(body, v); err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return nil, badRequest(wire.CodeInvalidJSON, "request body: "+err.Error())
	}
	if dec.More() {
		return nil, badRequest(wire.CodeInvalidJSON, "request body: trailing data after the JSON object")
	}
	return body, nil
}

// checkJSONType refuses a JSON body not sent as application/json (charset,
// if given, utf-8). A web page can send text/plain, form-encoded and
// multipart bodies to any address without the browser asking the server
// first; application/json it cannot, so requiring it keeps pages from
// acquiring or releasing locks on a node without access control.
func checkJSONType(h http.Header) error {
	values := h.Values("Content-Type")
	if len(values) == 1 && values[0] == "application/json" {
		return nil // what clients send; parsing it would allocate
	}
	if len(values) == 1 {
		mt, params, err := mime.ParseMediaType(values[0])
		if cs, ok := params["charset"]; err == nil && mt == "application/json" && (!ok || strings.EqualFold(cs, "utf-8")) {
			return nil
		}
	}
	return &wire.Error{Code: wire.CodeUnsupportedMediaType, Message: fmt.Sprintf("Content-Type %.64q: want application/json for a JSON body", strings.Join(values, ", "))}
}

// CheckValue refuses a lock value over wire.MaxLockValue bytes, not UTF-8,
// or holding a character holders refuse (control, bidi, separator and
// zero-width characters): a value is shown to people and other programs as
// a holder is, and a NUL or an override could make it read as another.
func CheckValue(v string) error {
	if v != "" && !Printable(v, wire.MaxLockValue) {
		return badRequest(wire.CodeInvalidValue, fmt.Sprintf("value: want at most %d bytes of printable UTF-8 (no control, bidi, separator or zero-width characters)", wire.MaxLockValue))
	}
	return nil
}

func badRequest(code, msg string) *wire.Error { return &wire.Error{Code: code, Message: msg} }
