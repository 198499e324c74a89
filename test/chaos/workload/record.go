package workload

import (
	"cmp"
	"encoding/json"
	"fmt"
	"slices"
	"sync"

	"github.com/fencer-io/fencer/test/chaos/history"
)

// Line is one record a client writes on stdout.
type Line struct {
	Ev LineKind `json:"ev"`
	// ID numbers the client's operations; an invoke and its complete share it.
	ID int         `json:"id,omitempty"`
	Op *history.Op `json:"op,omitempty"`
	// Lock, Token and TTLMillis describe the grant of a hold line.
	Lock      string `json:"lock,omitempty"`
	Token     uint64 `json:"token,omitempty"`
	TTLMillis int64  `json:"ttl_ms,omitempty"`
	// Obs is what an observe line reports.
	Obs *history.Observation `json:"obs,omitempty"`
}

// LineKind names a Line.
type LineKind string

// The kinds of Line. Hold and Unhold bracket the time a client sits on a
// granted lock between its writes, which is when the harness pauses it.
const (
	Invoke   LineKind = "invoke"
	Complete LineKind = "complete"
	Hold     LineKind = "hold"
	Unhold   LineKind = "unhold"
	// Observe reports a leadership an election observer was told of.
	Observe LineKind = "observe"
)

// Holding is a client's current hold, as the recorder last heard it.
type Holding struct {
	Lock  string
	Token uint64
	TTL   int64 // milliseconds
}

// Recorder assembles the clients' lines into one history. It is safe for
// concurrent use: each client's stdout is read by its own goroutine.
type Recorder struct {
	mu      sync.Mutex
	done    []history.Op
	pending map[[2]int]history.Op // (client, id) → invoked op
	holding map[int]Holding
	seen    []history.Observation
}

// NewRecorder returns an empty recorder.
func NewRecorder() *Recorder {
	return &Recorder{pending: map[[2]int]history.Op{}, holding: map[int]Holding{}}
}

// Feed records one line from client.
func (r *Recorder) Feed(client int, raw []byte) error {
	var l Line
	if err := json.Unmarshal(raw, &l); err != nil {
		return fmt.Errorf("client %d: bad line %q: %w", client, raw, err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	switch l.Ev {
	case Invoke, Complete:
		if l.Op == nil {
			return fmt.Errorf("client %d: %s line without op", client, l.Ev)
		}
		op := *l.Op
		op.Client = client
		key := [2]int{client, l.ID}
		if l.Ev == Invoke {
			r.pending[key] = op
			return nil
		}
		delete(r.pending, key)
		r.done = append(r.done, op)
	case Hold:
		r.holding[client] = Holding{Lock: l.Lock, Token: l.Token, TTL: l.TTLMillis}
	case Unhold:
		delete(r.holding, client)
	case Observe:
		if l.Obs == nil {
			return fmt.Errorf("client %d: observe line without obs", client)
		}
		o := *l.Obs
		o.Observer = client
		r.seen = append(r.seen, o)
	default:
		return fmt.Errorf("client %d: unknown line kind %q", client, l.Ev)
	}
	return nil
}

// Holding returns what client is holding between writes, if anything.
func (r *Recorder) Holding(client int) (Holding, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	h, ok := r.holding[client]
	return h, ok
}

// ClientGone forgets client's hold, once its process has exited.
func (r *Recorder) ClientGone(client int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.holding, client)
}

// Observations returns what the election observers saw, each observer's
// in the order it reported them.
func (r *Recorder) Observations() []history.Observation {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.seen)
}

// Ops returns every operation recorded, ordered by call time. An operation
// invoked but never completed is returned as unknown, returning at end.
func (r *Recorder) Ops(end int64) []history.Op {
	r.mu.Lock()
	defer r.mu.Unlock()
	ops := slices.Clone(r.done)
	for _, op := range r.pending {
		op.Outcome = history.Unknown
		op.Error = "no answer recorded before the run ended"
		op.Return = max(end, op.Call)
		ops = append(ops, op)
	}
	slices.SortStableFunc(ops, func(a, b history.Op) int {
		if c := cmp.Compare(a.Call, b.Call); c != 0 {
			return c
		}
		return cmp.Compare(a.Client, b.Client)
	})
	return ops
}
