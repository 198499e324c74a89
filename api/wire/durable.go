package wire

// Durable waiters (issue 28): "durable": true on an acquire with a wait
// (a lock's, an election's campaign, a semaphore's permit) puts the waiter
// in the log, so a new leader serves the name's queue in the same order.
// It needs a request_id (invalid_request_id otherwise) and wait_ms > 0
// (invalid_wait); a multi-lock acquire does not take it (invalid_wait).
// The waiter keeps its place for wait_ms after each ask with its request
// id, on any leader; asked again within that, it is not queued twice.
// A grant given to a durable waiter carries wait_index, the log index of
// the entry that enqueued it.

// EventQueued: a durable waiter was enqueued (Lock or Semaphore, Holder,
// WaitIndex: this entry's index); EventDequeued: its wait ran out before
// it was granted (WaitIndex: where it had queued).
const (
	EventQueued   = "queued"
	EventDequeued = "dequeued"
)
