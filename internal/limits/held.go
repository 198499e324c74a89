package limits

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"sync"
)

// ErrTooManyHeld: a request past a Held limit (429 too_many_watches at the
// edge).
var ErrTooManyHeld = errors.New("too many held requests")

// Defaults of HeldConfig. An open event stream costs a node a connection
// and a few tens of KB whatever its reader does (docs/benchmarks.md), a
// parked blocking read less; the per-node defaults keep both well inside
// what a 2-core node serves, and the per-client ones let no one client take
// a node's share.
const (
	DefaultMaxStreams                = 2048
	DefaultMaxStreamsPerClient       = 256
	DefaultMaxBlockingReads          = 4096
	DefaultMaxBlockingReadsPerClient = 1024
)

// heldRetryAfter is the Retry-After of a refusal, in seconds: held requests
// end at their own pace, so there is no exact time to give.
const heldRetryAfter = 2

// Held counts the requests a node holds open, event streams or parked
// blocking reads, in all and per client (ClientKey: the ACL principal, or
// the remote IP), and refuses one past either limit. A request rate limit
// does not bound these: each is one request, held for minutes.
type Held struct {
	what               string // "event streams", for the refusal
	perNode, perClient int

	mu     sync.Mutex
	total  int
	client map[string]int
}

// NewHeld returns a count of what ("event streams") limited to perNode in
// all and perClient per client; a limit of 0 or less is no limit.
func NewHeld(what string, perNode, perClient int) *Held {
	return &Held{what: what, perNode: perNode, perClient: perClient, client: map[string]int{}}
}

// Take counts one more held request of r's client; the caller must call the
// release it returns once the request ends. Past a limit it sets
// Retry-After on w and returns an error wrapping ErrTooManyHeld.
func (h *Held) Take(w http.ResponseWriter, r *http.Request) (release func(), err error) {
	key := ClientKey(r)
	h.mu.Lock()
	var refusal string
	switch {
	case h.perNode > 0 && h.total >= h.perNode:
		refusal = fmt.Sprintf("this node holds %d %s, its limit; retry after %ds or at another member", h.total, h.what, heldRetryAfter)
	case h.perClient > 0 && h.client[key] >= h.perClient:
		refusal = fmt.Sprintf("this client (%s) holds %d %s on this node, its limit; close one, or retry after %ds", key, h.client[key], h.what, heldRetryAfter)
	default:
		h.total++
		h.client[key]++
	}
	h.mu.Unlock()
	if refusal != "" {
		w.Header().Set("Retry-After", strconv.Itoa(heldRetryAfter))
		return nil, fmt.Errorf("%w: %s", ErrTooManyHeld, refusal)
	}
	var once sync.Once
	return func() { once.Do(func() { h.release(key) }) }, nil
}

func (h *Held) release(key string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.total--
	if h.client[key]--; h.client[key] <= 0 {
		delete(h.client, key)
	}
}

// Open returns how many are held now.
func (h *Held) Open() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.total
}
