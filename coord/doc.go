// Package coord is fencer's coordination layer: the primitives clients use
// (locks, elections, semaphores, lock-delays and fenced keys), with their
// wait queues, handoff and leader-only lease timers, over a Raft node it
// reaches only through the Raft interface it declares.
//
// Service holds what every primitive shares on the leader: the view of
// leadership it serves in (coord/internal/leadership), the lease timers
// (coord/lease) and the per-name queues of waiters (coord/internal/waitq).
// A primitive is a file of methods on Service (locks.go, semaphores.go,
// delay.go, kv.go) plus the FSM commands it proposes; the event history
// that watchers follow is coord/events. DESIGN.md says why it is built this
// way.
package coord
