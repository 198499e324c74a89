// Package sqlitefence fences writes to SQLite with fencer's tokens, for
// embedded resources. It has pgfence's API (Migrate, Exec, ExecSeq, Advance,
// HighWater, UpdateRow, UpsertRow) on database/sql and modernc.org/sqlite,
// a SQLite in pure Go, so fencer's build stays CGO-free.
//
// The rule is the fence package's (fence.Mark.Admits; missing and zero
// tokens are refused), checked inside SQLite, in the transaction that writes
// the data:
//
//   - Scope marks: the fencer_high_water table (Migration) holds one mark
//     per scope. ExecSeq begins a transaction whose first statement is the
//     mark's INSERT ... ON CONFLICT DO UPDATE ... WHERE (token, seq) <
//     (new token, new seq), then runs the caller's writes in it. A stale
//     token rolls everything back; so does an error from the caller.
//   - Row tokens: a table with a fence_token column is fenced row by row
//     with UpdateRow or UpsertRow, one statement each.
//
// Why this is safe against concurrent writers: SQLite has one writer per
// database file at a time, across connections and processes. The write
// lock is taken before the mark is read: Open's DSN asks for BEGIN
// IMMEDIATE (_txlock=immediate), and even under a plain BEGIN the
// transaction's first statement is the upsert, a write, so SQLite takes the
// write lock for it before reading the row. A second writer waits for the
// lock (busy_timeout) and then reads the mark the first one committed. A
// deferred transaction that read the mark first and wrote after would be the
// hazard: in WAL mode its upgrade fails with SQLITE_BUSY_SNAPSHOT when
// another writer committed meanwhile, and in rollback-journal mode two such
// readers deadlock. Nothing here reads before it writes.
//
// Durability: a mark is as durable as the commit. Open sets WAL with
// synchronous=FULL, so every commit fsyncs the WAL before it returns (WAL
// with synchronous=NORMAL can lose the last commits on power loss: the mark
// with its data, but a newer writer's acknowledged write with them). A
// database opened another way must keep synchronous at FULL (or EXTRA).
//
// SQLite's INTEGER is a signed 64-bit value, so, as in pgfence, tokens above
// math.MaxInt64 are refused with ErrTokenRange instead of wrapping negative.
package sqlitefence
