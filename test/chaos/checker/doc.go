// Package checker judges a history recorded by the chaos suite. It knows
// nothing of how the history was produced: it reads a History (client
// operations with their call and return times, nemesis events, final reads,
// the external resource's log of accepted writes, and member state hashes)
// and says which rules it breaks, with the operations that break them.
//
// # Two models, checked by porcupine
//
// Package model holds the two models, of a lock and of a fenced key (its
// doc says what each allows and forbids), each partitioned by lock name or
// key, so each lock and each key is checked on its own.
//
// # What unknown means
//
// An Unknown outcome (timeout, connection error) may or may not have taken
// effect, and may take effect at any later time, even after the client gave
// up: its interval is stretched past the end of the history. An OtherError
// outcome (the service answered with an error the client could not classify)
// is treated the same, except that if it took effect it did so before the
// answer. For both, the models branch: the operation happened, or it did not.
// Reads and gets that did not answer say nothing.
//
// An indeterminate acquire that happened granted a token nobody saw. Rather
// than carry a "held under some unseen token" state, the model lets the first
// op that observes a token no acquire ok granted (a read held, a lock_held, a
// renew or release ok) adopt it, provided an indeterminate acquire on that
// lock was called before that op returned and the token exceeds every grant
// ordered so far. A renew of a token the lock has moved past is still
// refused. UnseenGrants checks the counting the model skips: each unseen
// token needs an indeterminate acquire of its own. The price is that grants
// after an unseen one are only required to exceed the tokens actually seen,
// and an adopted grant's holder is not checked.
//
// Indeterminate operations whose effect nothing observes are left out of the
// search, and Unknown puts that something does observe must take effect
// before the last such observer returns (prune.go has the argument for why
// neither changes a verdict). Without this, one violation late in a history
// with a few dozen indeterminate operations makes the search exhaust any
// time budget.
//
// # Whole-history invariants
//
// Some properties span locks, keys or members, or need no search:
//
//   - UniqueGrants: no token is granted twice, on any locks.
//   - UnseenGrants: every token observed as current was granted, by an
//     acquire ok or by an indeterminate acquire of its own.
//   - GrantOrder: a grant of a lock called after another grant of it
//     returned carries a greater token.
//   - EpochTokens: after a restart, restore or member replacement, every
//     grant exceeds every token acknowledged before it.
//   - FenceOrder: the resource's log of accepted writes only moves forward,
//     and so do acknowledged puts in real-time order.
//   - NoLostWrite: each key's final read returns the newest acknowledged
//     write, or a newer write that was acknowledged or indeterminate.
//   - MemberHashes: all members end with the same state.
//   - PermitLimits: no semaphore ever had more permits certainly live at
//     once than its limit (permits.go says what certainly live means).
//   - RWExclusion: no exclusive grant of a lock taken in a mode was
//     certainly live beside any other grant of that lock, shared or
//     exclusive (rwlocks.go).
//   - DurableOrder: a lock's durable waiters were granted in the order of
//     their Enqueue entries (wait_index), whichever leader served them,
//     and each after its Enqueue (durable.go).
//   - OneLeaderPerTerm: a term (an election's token) has one leader
//     wherever it is seen, and shows only values its leader published.
//   - ObserverOrder: each election observer saw the terms in token order,
//     each once.
//   - FalseUnissued: no write is refused unissued_token ("above every token
//     granted so far") when a token at least as great had been
//     acknowledged to a client, or seen by an observer, before it was sent.
//   - SessionGrantsEnd, SessionWrites, SessionSurvivors: every grant a
//     session still held when it ended ends at the session's end index,
//     no lock-bound write with a session's token is accepted after that
//     index, and no grant outlives its session (sessions.go says how the
//     watcher's stream and the clients' history each show it).
//   - RevokedWrites: no lock-bound write with a revoked token is
//     acknowledged after a client was told of the revoke, nor accepted at
//     an index after the revoke's entry (revoke.go).
//
// # Refusals by code
//
// Every answer of the service with an error body is recorded with its code
// (history.Op.Code). A refusal is read by its code and nothing else: only
// stale_token says a put's stamp is not above the key's mark (fencer has no
// separate code for an equal token: a replay is stale_token too);
// not_lock_holder and every other definite refusal of a put (outcome
// refused: unissued_token, missing_token, kv_full, ...) mean it did not
// take effect and say nothing of the mark. A put's refusal is definite
// because the client reports one that follows an attempt which may have
// landed as outcome unknown; the other kinds' clients make no such promise,
// so their refusals without an outcome of their own stay indeterminate
// (error), as does any answer without a code.
//
// # Limits
//
// Expiry being invisible, the lock model cannot tell a second grant made
// while the first holder still held the lock from a grant made after the
// first lease expired: both are acquire ok with a greater token. This is by
// design, because it is the fence, not the lock, that protects the resource.
// A double-holder bug is caught when the old holder is told it still holds
// the lock after the newer grant (renew ok, release ok, read held or
// lock_held of the old token: the model's max has moved past it), and when
// the resource accepted the old holder's write after the new one's
// (FenceOrder, and the key model).
//
// The checker sees only what clients observed. A stale lease that is never
// renewed, read or written with after the newer grant leaves no trace. Reads
// are checked as linearizable; a service that serves stale reads by design
// would fail here. A re-entrant acquire that returns the holder's existing
// token as ok fails the lock model, which expects every ok to be a new grant.
// Lease identifiers are recorded but not checked: a token already names one
// grant. Porcupine's search is NP-hard, so a long, highly concurrent history
// (many indeterminate operations on one lock or key) can exhaust the time
// budget; the verdict is then Inconclusive, not Pass.
package checker
