package api

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"

	"github.com/fencer-io/fencer/api/wire"
)

// Limits on input. Names and keys share one alphabet.
const (
	maxHolderLen = 200
	maxReqIDLen  = 128
)

// ValidName reports whether s is a valid lock name or key: 1-200 of
// [A-Za-z0-9._:-]. It runs on every request, so it is a loop rather than a
// regular expression (which cost a few percent of the leader's CPU).
func ValidName(s string) bool {
	if len(s) == 0 || len(s) > 200 {
		return false
	}
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9', c == '.', c == '_', c == ':', c == '-':
		default:
			return false
		}
	}
	return true
}

func checkName(s string) error {
	if !ValidName(s) {
		return badRequest(wire.CodeInvalidName, fmt.Sprintf("lock name %.64q: want 1-200 of [A-Za-z0-9._:-]", s))
	}
	return nil
}

func checkKey(s string) error {
	if !ValidName(s) {
		return badRequest(wire.CodeInvalidKey, fmt.Sprintf("key %.64q: want 1-200 of [A-Za-z0-9._:-]", s))
	}
	return nil
}

// printable reports whether s is non-empty, at most max bytes, and free of
// control characters.
func printable(s string, max int) bool {
	if s == "" || len(s) > max {
		return false
	}
	for _, r := range s {
		if r < 0x20 || r == 0x7f {
			return false
		}
	}
	return true
}

func validateAcquire(r *wire.AcquireRequest) error {
	if !printable(r.Holder, maxHolderLen) {
		return badRequest(wire.CodeInvalidHolder, "holder: want 1-200 printable characters")
	}
	if r.TTLMillis == 0 {
		r.TTLMillis = wire.DefaultTTL.Milliseconds()
	}
	// Compare in milliseconds: converting first could overflow into range.
	if r.TTLMillis < wire.MinTTL.Milliseconds() || r.TTLMillis > wire.MaxTTL.Milliseconds() {
		return badRequest(wire.CodeInvalidTTL, fmt.Sprintf("ttl_ms %d: want %d to %d", r.TTLMillis, wire.MinTTL.Milliseconds(), wire.MaxTTL.Milliseconds()))
	}
	if r.WaitMs < 0 || r.WaitMs > wire.MaxWait.Milliseconds() {
		return badRequest(wire.CodeInvalidWait, fmt.Sprintf("wait_ms %d: want 0 to %d", r.WaitMs, wire.MaxWait.Milliseconds()))
	}
	if r.RequestID != "" && !printable(r.RequestID, maxReqIDLen) {
		return badRequest(wire.CodeInvalidRequestID, "request_id: want 1-128 printable characters")
	}
	return nil
}

func validateLease(r *wire.LeaseRequest) error {
	if len(r.Lease) != 32 {
		return badRequest(wire.CodeInvalidLease, "lease: want the 32-character secret returned by acquire")
	}
	if r.Token == 0 {
		return badRequest(wire.CodeInvalidToken, "token: want the token returned by acquire")
	}
	return nil
}

// decodeJSON reads a JSON body strictly: size-capped, unknown fields and
// trailing data refused.
func decodeJSON(w http.ResponseWriter, r *http.Request, v any) error {
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, wire.MaxBodyBytes))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return &wire.Error{Code: wire.CodeBodyTooLarge, Message: fmt.Sprintf("request body exceeds %d bytes", wire.MaxBodyBytes)}
		}
		if errors.Is(err, io.EOF) {
			return badRequest(wire.CodeInvalidJSON, "request body is empty; want a JSON object")
		}
		return badRequest(wire.CodeInvalidJSON, "request body: "+err.Error())
	}
	if dec.More() {
		return badRequest(wire.CodeInvalidJSON, "request body: trailing data after the JSON object")
	}
	return nil
}

// ParseToken parses a fencing token; see wire.ParseToken.
func ParseToken(s string) (uint64, bool) { return wire.ParseToken(s) }
