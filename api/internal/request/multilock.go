package request

import (
	"fmt"
	"net/http"

	"github.com/fencer-io/fencer/api/wire"
)

// MultiAcquire reads and checks a multi-acquire body: its names (at most
// wire.MaxMultiNames valid lock names, none twice: invalid_names), then
// the rest as an acquire's, with the default TTL when ttl_ms is absent.
func MultiAcquire(w http.ResponseWriter, r *http.Request) (wire.MultiAcquireRequest, error) {
	var body wire.MultiAcquireRequest
	raw, err := decodeJSON(w, r, &body)
	if err != nil {
		return body, err
	}
	if !ttlGiven(raw) && body.Session == 0 {
		body.TTLMillis = wire.DefaultTTL.Milliseconds()
	}
	return body, ValidateMultiAcquire(&body)
}

// ValidateMultiAcquire checks a multi-acquire body.
func ValidateMultiAcquire(r *wire.MultiAcquireRequest) error {
	if err := CheckNames(r.Names); err != nil {
		return err
	}
	// A multi-lock under a session is not built: the MultiAcquire entry
	// carries no session, and a member of log format 9 to 11 would drop
	// the field and apply another grant than the leader's (it needs a log
	// format of its own). Its mode is checked as a single acquire's.
	switch {
	case r.Durable:
		return badRequest(wire.CodeInvalidWait, "durable: a waiting multi-lock keeps its place in each name's queue on the leader only (a durable one is not built); leave durable out")
	case r.Session != 0 || r.SessionLease != "":
		return badRequest(wire.CodeInvalidToken, "session: a multi-lock under a session is not built; give ttl_ms")
	}
	lock := wire.AcquireRequest{Holder: r.Holder, TTLMillis: r.TTLMillis, WaitMs: r.WaitMs, RequestID: r.RequestID, Mode: r.Mode}
	return ValidateAcquire(&lock)
}

// CheckNames refuses a multi-lock's names: none, more than
// wire.MaxMultiNames, one that is not a valid lock name, or one twice.
func CheckNames(names []string) error {
	if len(names) == 0 || len(names) > wire.MaxMultiNames {
		return badRequest(wire.CodeInvalidNames, fmt.Sprintf("names: %d given, want 1 to %d lock names", len(names), wire.MaxMultiNames))
	}
	seen := make(map[string]bool, len(names))
	for _, n := range names {
		if !wire.ValidName(n) {
			return badRequest(wire.CodeInvalidNames, fmt.Sprintf("names: lock name %.64q: want %s", n, wire.NameRule))
		}
		if seen[n] {
			return badRequest(wire.CodeInvalidNames, fmt.Sprintf("names: %.64q given twice", n))
		}
		seen[n] = true
	}
	return nil
}
