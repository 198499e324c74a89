// Package fence is the resource side of fencer: it refuses writes whose
// fencing token is not strictly greater than the last one it accepted.
//
// A lock service can only hand out tokens; the guarantee exists only if the
// resource checks them. This package is built around the ways that check
// quietly breaks:
//
//   - A missing or malformed token is an error (ErrMissingToken, HTTP 428),
//     never token 0. Treating "missing" as zero is how a stripped header lets
//     a stale writer through.
//   - An equal token is a replay and is refused. A grant that needs to write
//     the same key more than once numbers its writes with a sequence
//     (Fencing-Sequence: 1, 2, ...); see Mark.Admits.
//   - The high-water mark lives in the same bbolt file as the data and is
//     written in the same fsynced transaction, in Store.UpdateSeq. A restart
//     cannot forget the mark, and a failed write cannot advance it, because
//     there is no moment where one is on disk without the other.
//   - Middleware buffers the handler's response and sends it only after the
//     commit, so a 2xx always means "durable and fenced".
//
// Fences are per key by default: each key has its own mark, which suits a
// resource whose keys are guarded by separate locks. Options.StoreWide makes
// the whole store one fence, for a resource guarded by a single lock. The
// choice is fixed when the store is created, since switching would start the
// new fence from zero.
//
// Packages pgfence, redisfence and sqlitefence apply the same rule to
// PostgreSQL, Redis and SQLite (docs/fences.md compares them); package
// resource is an example fenced storage server.
package fence
