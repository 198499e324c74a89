// Package coord is fencer's coordination layer: the primitives clients use
// (locks, elections, semaphores, sessions, lock-delays and fenced keys),
// with their wait queues, handoff and leader-only timers, over a Raft node
// it reaches only through the Raft interface it declares.
//
// Service holds what every primitive shares on the leader: the view of
// leadership it serves in (coord/internal/leadership), the timers of every
// lease and lock-delay (coord/lease, keyed by coord/internal/timed) and
// the grant engine (engine.go, freeing.go), which queues, serves, hands
// over, renews and expires the grants of every kind through the per-name
// queues of waiters (coord/internal/waitq). A kind of grant is a policy of
// the engine and its public methods (locks.go, semaphores.go); sessions.go
// ends many grants in one entry, kv.go is the fenced store; the event
// history that watchers follow is coord/events. DESIGN.md says why it is
// built this way.
package coord
