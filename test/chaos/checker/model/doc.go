// Package model holds the porcupine models the checker searches a history
// against: a lock and a fenced key.
//
// A lock is modeled as {held, token, holder, max}, where max is the greatest
// token known to have been granted for it. A lease can expire at any moment
// without any client seeing it, so the model lets a held lock become free
// whenever a step needs it to: acquire ok(T) is valid from any state but
// needs T > max; read free is always valid; lease_lost(T) is always valid and
// frees the lock if T was current. What the model forbids is observing a
// grant that cannot be current: renew ok(T), release ok(T), read held(T) and
// acquire lock_held(T) all need the lock held under T (and lock_held, when it
// names a holder, that holder).
//
// A fenced key is modeled as {value, last stamp}. put ok needs the fence to
// admit the put's stamp (a greater token, or the same token with a greater
// non-zero write sequence), stale_token needs it to refuse, and get returns
// exactly the last accepted put, or not found before the first. Only
// stale_token speaks of the mark: not_lock_holder and every other definite
// refusal (refused, with its code: unissued_token, missing_token, kv_full,
// ...) are always valid and change nothing, and only an unknown or error
// put branches on whether it took effect.
//
// Both are partitioned by lock name or key, so each lock and each key is
// checked on its own.
package model
