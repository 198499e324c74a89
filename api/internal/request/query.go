package request

import (
	"net/http"
	"strconv"
	"time"

	"github.com/fencer-io/fencer/api/wire"
)

// QueryToken reads a ?token=N query parameter.
func QueryToken(r *http.Request) (uint64, error) {
	token, ok := wire.ParseToken(r.URL.Query().Get("token"))
	if !ok {
		return 0, badRequest(wire.CodeInvalidToken, "token: want ?token=N with N a positive decimal integer")
	}
	return token, nil
}

// WatchSince reads where a watch starts: Last-Event-ID, else ?since=, else
// -1 (the node's applied index).
func WatchSince(r *http.Request) (int64, error) {
	raw, what := r.Header.Get(wire.HeaderLastEventID), wire.HeaderLastEventID
	if raw == "" {
		raw, what = r.URL.Query().Get("since"), "since"
	}
	if raw == "" {
		return -1, nil
	}
	n, err := strconv.ParseInt(raw, 10, 64)
	if err != nil || n < 0 {
		return 0, badRequest(wire.CodeInvalidIndex, what+": want a log index, a decimal integer ≥ 0")
	}
	return n, nil
}

// BlockingWait parses a blocking read's ?wait_index=N&wait=D: ok false
// when there is none. D is a duration ("30s", "2m"), at most
// wire.MaxBlockingWait, which is also its default.
func BlockingWait(r *http.Request) (index uint64, wait time.Duration, ok bool, err error) {
	if r.URL.RawQuery == "" {
		return 0, 0, false, nil // most requests: nothing to parse
	}
	q := r.URL.Query()
	rawIndex, rawWait := q.Get("wait_index"), q.Get("wait")
	if rawIndex == "" {
		if rawWait != "" {
			return 0, 0, false, badRequest(wire.CodeInvalidWait, "wait: a blocking read needs wait_index too (the Fencer-Index of the last answer)")
		}
		return 0, 0, false, nil
	}
	index, perr := strconv.ParseUint(rawIndex, 10, 64)
	if perr != nil {
		return 0, 0, false, badRequest(wire.CodeInvalidIndex, "wait_index: want a log index, a decimal integer ≥ 0")
	}
	wait = wire.MaxBlockingWait
	if rawWait != "" {
		d, perr := time.ParseDuration(rawWait)
		if perr != nil || d < 0 || d > wire.MaxBlockingWait {
			return 0, 0, false, badRequest(wire.CodeInvalidWait, "wait: want a duration from 0s to "+wire.MaxBlockingWait.String()+" (e.g. 30s)")
		}
		wait = d
	}
	return index, wait, true, nil
}
