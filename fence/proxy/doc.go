// Package proxy is a fencing proxy for any HTTP service: it stands in front
// of an upstream that knows nothing of fencing tokens and lets a write
// through only if its token passes, as fence.Middleware does for a Go
// handler. "fencer fence-proxy" serves it.
//
// The rules are the fence package's: a write (PUT, POST, PATCH, DELETE by
// default) without a valid Fencing-Token gets 428 missing_token, one whose
// token is not above its key's mark (fence.Mark.Admits, with
// Fencing-Sequence for several writes under one grant) gets 409 stale_token
// with last_token, and neither reaches the upstream. A write that names its
// lock in Fencing-Lock also needs its token to be that lock's current grant,
// asked of the cluster (GET /v1/locks/{name}/check) right before it is sent,
// or gets 409 not_lock_holder. Reads pass through untouched.
//
// # How a write is held
//
// The proxy cannot make the upstream's write and its own mark one atomic
// step, as the stores' fences do, so it orders them instead:
//
//   - One write per key at a time. From the check to the upstream's answer
//     a key is locked in the proxy, so two writes with different tokens
//     cannot both pass a mark below them and reach the upstream in either
//     order. Different keys go in parallel. The body is read in full before
//     the key is locked, so a slow client holds up nobody.
//   - The mark is advanced, and fsynced, before the write is sent, and put
//     back if the upstream answers anything but 2xx or the request could not
//     be sent at all. So it stays advanced exactly for a write the upstream
//     accepted, and also for one whose outcome the proxy never learned: its
//     own crash or a lost answer (502 outcome_unknown). Counting an unknown
//     outcome as made can only refuse more; the other choice would let an
//     older token in behind a write that did happen. A retry of such a
//     write needs a greater token or a Fencing-Sequence.
//   - The marks are in their own bbolt file (OpenMarks), one per key, keyed
//     by a path pattern ("/v1/items/{id}", "/files/{path...}") or one for the
//     whole upstream. The pattern is recorded in the file, and opening it
//     with another one fails: other keys would start from zero. A fenced
//     write whose path the pattern does not match gets 400 empty_key:
//     refused rather than passed unfenced.
//
// # What it cannot protect
//
// Only writes that go through it. A client that reaches the upstream
// directly, another proxy in front of the same upstream, the upstream's own
// jobs, and any other way in bypass every check, so the upstream must accept
// writes from the proxy alone (listen on loopback or a private network,
// or require a credential only the proxy has). Two proxies on one upstream
// are two sets of marks: run one (its data directory is locked against a
// second). And the key must name what the upstream writes: an upstream that
// maps two paths to one resource (case folding, a trailing slash, a
// resource also reachable under another route) needs them in one key, or
// the whole upstream as one fence. A write the upstream makes later, in the
// background after a 2xx, is as fenced as its acceptance was, and no more.
package proxy
