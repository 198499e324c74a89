package entry

import "encoding/json"

// Durable waiters (fsm/durable.go): an acquire that waits with "durable"
// is an entry in the log, so a new leader serves a name's queue in the
// order its waiters were enqueued. Both commands are types of
// LogFormatDurableWaits, JSON only: a waiter is rarer than a lock's cycle.

// Enqueue puts a durable waiter at the tail of its name's durable FIFO:
// Acquire for a lock's (its Lock the name), or Permit for a semaphore's,
// one of them. The command is the one its grant will carry (the leader
// chose its secret), and WaitMillis how long the waiter stays queued
// without asking again; the leader times that, not the FSM.
type Enqueue struct {
	Acquire    *Acquire    `json:"acquire,omitempty"`
	Permit     *SemAcquire `json:"permit,omitempty"`
	WaitMillis int64       `json:"wait_ms"`
}

// Dequeue takes the durable waiter enqueued at Index out of the FIFO of
// Lock or Semaphore: its wait ran out on the leader's clock.
type Dequeue struct {
	Lock      string `json:"lock,omitempty"`
	Semaphore string `json:"semaphore,omitempty"`
	Index     uint64 `json:"index"`
}

func (*Enqueue) Type() CommandType { return CmdEnqueue }
func (*Dequeue) Type() CommandType { return CmdDequeue }

// enqueueFields is Enqueue without its methods, for its JSON.
type enqueueFields Enqueue

// enqueueJSON is an Enqueue's JSON: the lock acquire's principal beside
// it, which an Acquire's own JSON leaves out (acquire's principal is not
// in its JSON for older builds; every build that reads an Enqueue reads
// it).
type enqueueJSON struct {
	*enqueueFields
	Principal string `json:"principal,omitempty"`
}

// MarshalJSON writes the lock acquire's principal.
func (c *Enqueue) MarshalJSON() ([]byte, error) {
	w := enqueueJSON{enqueueFields: (*enqueueFields)(c)}
	if c.Acquire != nil {
		w.Principal = c.Acquire.Principal
	}
	return json.Marshal(w)
}

// UnmarshalJSON reads the lock acquire's principal back into it.
func (c *Enqueue) UnmarshalJSON(b []byte) error {
	w := enqueueJSON{enqueueFields: (*enqueueFields)(c)}
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	if c.Acquire != nil {
		c.Acquire.Principal = w.Principal
	}
	return nil
}

// Waiter is a durable waiter as the state keeps it and a snapshot holds
// it: its Enqueue's index (its place: a FIFO is in index order) and the
// command. Acquire's principal is in Principal (its JSON has none).
type Waiter struct {
	Index      uint64      `json:"index"`
	Acquire    *Acquire    `json:"acquire,omitempty"`
	Permit     *SemAcquire `json:"permit,omitempty"`
	Principal  string      `json:"principal,omitempty"`
	WaitMillis int64       `json:"wait_ms"`
}

// Name is the lock's or the semaphore's name the waiter waits for.
func (w *Waiter) Name() string {
	if w.Acquire != nil {
		return w.Acquire.Lock
	}
	return w.Permit.Semaphore
}

// Holder, RequestID are the waiter's acquire's.
func (w *Waiter) Holder() string {
	if w.Acquire != nil {
		return w.Acquire.Holder
	}
	return w.Permit.Holder
}

func (w *Waiter) RequestID() string {
	if w.Acquire != nil {
		return w.Acquire.RequestID
	}
	return w.Permit.RequestID
}

// Waited is a live grant that was a durable waiter's, with the index of
// its Enqueue (a snapshot's "waited" record).
type Waited struct {
	Token     uint64 `json:"token"`
	WaitIndex uint64 `json:"wait_index"`
}
