package client

import (
	"errors"
	"net/http"
	"testing"

	"github.com/fencer-io/fencer/api/wire"
)

// TestEveryCodeHasASentinel: an answer with any code of the contract matches
// a sentinel with errors.Is, so a code added to wire without one here fails.
func TestEveryCodeHasASentinel(t *testing.T) {
	sentinels := map[error]bool{}
	for _, code := range wire.Codes() {
		s, ok := codeErrors[code]
		if !ok {
			t.Errorf("code %q has no sentinel error in codeErrors", code)
			continue
		}
		// A status no code has, so only the code can make it match.
		err := error(&APIError{Status: 599, Code: code, Message: "m"})
		if !errors.Is(err, s) {
			t.Errorf("an APIError with code %q does not match %v", code, s)
		}
		sentinels[s] = true
	}
	if len(codeErrors) != len(wire.Codes()) {
		t.Errorf("codeErrors has %d codes, wire %d", len(codeErrors), len(wire.Codes()))
	}
	// Codes of different meaning keep apart: only the malformed-request
	// codes share ErrInvalid.
	for _, c := range []string{wire.CodeRateLimited, wire.CodeTooManyLocks, wire.CodeUnauthorized, wire.CodeForbidden} {
		err := &APIError{Status: http.StatusTooManyRequests, Code: c}
		for s := range sentinels {
			if s != codeErrors[c] && errors.Is(err, s) {
				t.Errorf("code %q also matches %v", c, s)
			}
		}
	}
}
