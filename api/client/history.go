package client

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/fencer-io/fencer/api/client/internal/transport"
	"github.com/fencer-io/fencer/api/wire"
)

// History returns up to n of lock's last grants, newest first (n ≤ 0: all
// that the cluster keeps, at most wire.MaxHistoryLimit), from the answering
// member's applied state: token, holder, the index of the grant and how it
// ended.
func (c *Client) History(ctx context.Context, lock string, n int) ([]wire.GrantRecord, error) {
	q := url.Values{}
	if n > 0 {
		q.Set("limit", strconv.Itoa(min(n, wire.MaxHistoryLimit)))
	}
	var out wire.LockHistory
	if err := c.tr.GetJSON(ctx, lockPath(lock, "history"), q, &out); err != nil {
		return nil, err
	}
	return out.Grants, nil
}

// SemaphoreHistory returns up to n of the semaphore name's last permits,
// newest first, as History does a lock's grants.
func (c *Client) SemaphoreHistory(ctx context.Context, name string, n int) ([]wire.GrantRecord, error) {
	q := url.Values{}
	if n > 0 {
		q.Set("limit", strconv.Itoa(min(n, wire.MaxHistoryLimit)))
	}
	var out wire.SemaphoreHistory
	if err := c.tr.GetJSON(ctx, kindPath("semaphores", name, "history"), q, &out); err != nil {
		return nil, err
	}
	return out.Grants, nil
}

// Token returns which lock (or, for a semaphore permit, which semaphore:
// GrantRecord.Semaphore) and holder got token and how the grant ended.
// A token the cluster's history does not hold is ErrUnknownToken; its
// *APIError's Reason says whether it is older than what is kept
// (wire.ReasonNotKept) or was never a grant (wire.ReasonNeverGranted).
func (c *Client) Token(ctx context.Context, token uint64) (wire.GrantRecord, error) {
	var out wire.GrantRecord
	err := c.tr.GetJSON(ctx, "/v1/tokens/"+strconv.FormatUint(token, 10), nil, &out)
	return out, err
}

// WaitLock is a blocking read of a lock (Consul's blocking queries): it
// returns the lock's state once an entry after index changed it, or when
// wait ends (then its current state), and the index it was read at, which
// is the next call's index. Start with index 0 (the current state at once)
// or a Fencer-Index from LocksAt. A wake-up may be spurious: compare the
// state. wait is at most wire.MaxBlockingWait (0: that).
func (c *Client) WaitLock(ctx context.Context, name string, index uint64, wait time.Duration) (wire.LockStatus, uint64, error) {
	if wait <= 0 || wait > wire.MaxBlockingWait {
		wait = wire.MaxBlockingWait
	}
	q := url.Values{"wait_index": {strconv.FormatUint(index, 10)}, "wait": {wait.String()}}
	var st wire.LockStatus
	at, err := c.getIndexed(ctx, &transport.Request{Method: http.MethodGet, Path: lockPath(name, ""), Query: q, Extra: wait}, &st)
	return st, at, err
}
