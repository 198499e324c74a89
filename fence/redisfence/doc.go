// Package redisfence fences writes to Redis with fencer's tokens.
//
// The rule is the fence package's (fence.Mark.Admits: a write passes only
// with a token greater than the scope's mark, or the same token with a
// greater Fencing-Sequence; a missing or zero token is refused), and the
// check happens inside Redis, in one server-side script (fence.lua, run with
// EVALSHA, falling back to EVAL) that reads the scope's mark, runs the
// caller's commands and writes the new mark. Redis runs a script atomically:
// no other client's command runs between the mark's read and its write, so
// two writers cannot both pass the check against the same mark. A check made
// by the client (GET the mark, then SET) is the race this package exists to
// remove; so is a MULTI/EXEC without WATCH, which cannot refuse anything.
//
// The mark of scope lives in the hash MarkKey(scope) ("fencer:high_water:"
// + scope, fields token and seq), beside the data and in the same keyspace,
// so it is persisted, replicated and restored with the data, by the same
// AOF record. A refused write changes nothing. A command that fails inside
// an admitted write (WRONGTYPE, a syntax error) would leave the commands
// before it applied, since Redis does not roll a script back; so the script
// saves every key the commands name (DUMP, PTTL) before the first one runs,
// puts them back if one fails, and writes the mark last: the write is
// refused whole with a *CommandError and the mark does not move. That save
// costs a copy of each named key per write, so fence keys of modest size.
//
// Tokens are uint64 and Lua's numbers are doubles (exact only to 2^53), so
// the script compares tokens as canonical decimal strings: every fencer
// token is accepted, none is rounded.
//
// What the server must be configured for, since the mark is only as safe as
// the key holding it:
//
//   - appendonly yes, appendfsync always: Redis answers a write only after
//     its AOF record is fsynced, so an acknowledged mark survives a crash
//     (with everysec a crash can lose the last second: the mark and its data
//     together, but a newer writer's acknowledged write with them).
//   - maxmemory-policy noeviction (or a volatile-* policy with no TTL on the
//     mark keys): an evicted mark is a fence reset to zero.
//   - No FLUSHALL/FLUSHDB, DEL or EXPIRE of fencer:high_water:* keys.
//   - Replication is asynchronous: a failover to a replica that had not yet
//     received a write loses that write and its mark together. Fence a
//     primary whose writes you would not lose anyway.
//
// In Redis Cluster every key of one call must be in one slot: give the
// scope and the keys it guards one hash tag ({order:42} and
// {order:42}:items), which MarkKey keeps, since the prefix has no braces.
package redisfence
