package workload

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/fencer-io/fencer/api/wire"
	"github.com/fencer-io/fencer/test/chaos/history"
)

// RawAPI sends the session calls as plain HTTP, so that the history holds
// the server's own answers and nothing a client library made of them (the
// Go client's Session type is not what is under test here). Any node
// forwards them to the leader; RawAPI moves to the next endpoint on an
// answer that says nothing was done (no_leader) or a failed
// connection, until its context ends.
type RawAPI struct {
	hc        *http.Client
	endpoints []string
	attempt   time.Duration

	mu   sync.Mutex
	next int // the endpoint to try first
}

// NewRawAPI returns a RawAPI over endpoints (host:port or URLs), each
// attempt bounded by attempt (and a call's extra).
func NewRawAPI(endpoints []string, attempt time.Duration) *RawAPI {
	return &RawAPI{hc: &http.Client{}, endpoints: endpoints, attempt: attempt}
}

// RawError is a refusal the service answered, with its code.
type RawError struct {
	Status int
	Body   wire.Error
}

func (e *RawError) Error() string {
	return fmt.Sprintf("HTTP %d %s: %s", e.Status, e.Body.Code, e.Body.Message)
}

// errUncertain marks an error after an attempt that may have taken effect:
// its answer was lost, or it was a 5xx other than one that says nothing
// was done.
var errUncertain = errors.New("an attempt may have taken effect")

// Call sends method path with body (JSON; nil for none) and decodes a 2xx
// answer into out; extra lengthens each attempt (an acquire's wait). Its
// error is a *RawError for a refusal, wrapped in
// errUncertain when an earlier attempt may have taken effect, or
// errUncertain itself.
func (a *RawAPI) Call(ctx context.Context, method, path string, extra time.Duration, body, out any) error {
	var raw []byte
	if body != nil {
		var err error
		if raw, err = json.Marshal(body); err != nil {
			panic(err)
		}
	}
	uncertain := false
	var last error
	for attempt := 0; ; attempt++ {
		if attempt > 0 {
			t := time.NewTimer(50 * time.Millisecond)
			select {
			case <-ctx.Done():
				t.Stop()
				if uncertain {
					return fmt.Errorf("%w: %w", errUncertain, last)
				}
				return fmt.Errorf("%w (nothing done): %w", ctx.Err(), last)
			case <-t.C:
			}
		}
		status, resp, err := a.do(ctx, method, a.endpoint(attempt), path, raw, a.attempt+extra)
		switch {
		case err != nil:
			// A request that never got a connection did nothing; any
			// other may have reached the leader before its answer was
			// lost.
			var dial *net.OpError
			refused := errors.As(err, &dial) && dial.Op == "dial"
			uncertain, last = uncertain || (body != nil && !refused), err
			continue
		case status/100 == 2:
			if out != nil {
				if err := json.Unmarshal(resp, out); err != nil {
					return fmt.Errorf("%w: bad answer %q: %w", errUncertain, resp, err)
				}
			}
			return nil
		}
		var e wire.Error
		_ = json.Unmarshal(resp, &e)
		re := &RawError{Status: status, Body: e}
		if status >= 500 {
			// Only no_leader says the request was not taken up.
			if e.Code != wire.CodeNoLeader {
				uncertain = true
			}
			last = re
			continue
		}
		if uncertain {
			return fmt.Errorf("%w: %w", errUncertain, re)
		}
		return re
	}
}

func (a *RawAPI) endpoint(attempt int) string {
	a.mu.Lock()
	defer a.mu.Unlock()
	if attempt > 0 {
		a.next = (a.next + 1) % len(a.endpoints)
	}
	return a.endpoints[a.next]
}

func (a *RawAPI) do(ctx context.Context, method, endpoint, path string, body []byte, timeout time.Duration) (int, []byte, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	base := endpoint
	if !strings.Contains(base, "://") {
		base = "http://" + base
	}
	req, err := http.NewRequestWithContext(ctx, method, base+path, bytes.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := a.hc.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return 0, nil, err
	}
	return resp.StatusCode, b, nil
}

// settleRaw sets op's outcome from a RawAPI call's error: ok, a definite
// refusal (session_expired, lock_held, semaphore_full and lock_delay have
// outcomes of their own), or indeterminate.
func settleRaw(op *history.Op, err error) {
	if err == nil {
		op.Outcome = history.OK
		return
	}
	op.Error = err.Error()
	var re *RawError
	if errors.As(err, &re) {
		op.Code = re.Body.Code
	}
	switch {
	case re == nil || errors.Is(err, errUncertain) || re.Status >= 500:
		op.Outcome = history.Unknown
	case re.Body.Code == wire.CodeSessionExpired:
		op.Outcome = history.SessionExpired
	case re.Body.Code == wire.CodeLockHeld && op.Kind == history.Acquire:
		op.Outcome = history.LockHeld
		op.Token, op.HeldBy = re.Body.Token, re.Body.Holder
	case re.Body.Code == wire.CodeLockHeld && op.Kind == history.MultiAcquire:
		op.Outcome = history.LockHeld
		op.Token, op.HeldBy, op.Lock = re.Body.Token, re.Body.Holder, re.Body.Lock
	case re.Body.Code == wire.CodeLockDelay && op.Kind == history.MultiAcquire:
		op.Outcome = history.LockDelay
	case re.Body.Code == wire.CodeLeaseLost && (op.Kind == history.MultiRenew || op.Kind == history.MultiRelease):
		op.Outcome = history.LeaseLost
	case re.Body.Code == wire.CodeSemaphoreFull && op.Kind == history.SemAcquire:
		op.Outcome = history.SemaphoreFull
	case re.Body.Code == wire.CodeLockDelay && op.Kind == history.SemAcquire:
		op.Outcome = history.LockDelay
	default:
		op.Outcome = history.OtherError
	}
}
