// Package pgfence fences writes to PostgreSQL with fencer's tokens.
//
// The rule is the fence package's (a write is accepted only if its token is
// strictly greater than the last accepted one; missing and zero tokens are
// refused), but the check has to happen inside PostgreSQL, in the statement
// or transaction that writes the data. A check made in the client and
// followed by a separate write is a race that two writers will eventually
// win together.
//
// Two shapes are offered:
//
//   - Scope marks: the fencer_high_water table (Migration) holds one mark
//     per scope. ExecSeq advances it with a single INSERT ... ON CONFLICT
//     DO UPDATE ... WHERE, which locks the scope's row until commit, then
//     runs the caller's writes in the same transaction. A stale token rolls
//     everything back.
//   - Row tokens: a table with a fence_token column is fenced row by row
//     with UpdateRow or UpsertRow, one statement each, no extra table.
//
// fencer's tokens are uint64 but bigint is signed, so tokens above
// math.MaxInt64 are refused with ErrTokenRange instead of wrapping negative.
// Marks are as durable as the commit; PostgreSQL's default fsync and
// synchronous_commit settings keep them across a crash or restart.
package pgfence
