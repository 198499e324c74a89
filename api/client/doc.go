// Package client is the Go client of fencer's HTTP API. It finds and follows
// the leader, retries what is safe to retry, and keeps leases alive.
//
//	c, err := client.New([]string{"10.0.0.1:7001", "10.0.0.2:7001", "10.0.0.3:7001"})
//	if err != nil {
//		return err
//	}
//	lease, err := c.Acquire(ctx, "billing-run", client.TTL(10*time.Second), client.Wait(5*time.Second))
//	if errors.Is(err, client.ErrLockHeld) {
//		return nil // somebody else is running it
//	} else if err != nil {
//		return err
//	}
//	defer lease.Release(context.Background())
//
//	// Work under lease.Context(): it is cancelled as soon as the lease may
//	// be lost. Every write the lock protects carries the token, so that a
//	// write from a holder that was paused past its lease is refused.
//	err = c.PutFenced(lease.Context(), "billing-state", state, lease.Token(), client.WithLock("billing-run"))
//	if errors.Is(err, client.ErrStaleToken) {
//		return lease.Err() // a newer holder has written: stop
//	}
//
// # Leader following
//
// Any member answers any request (followers forward to the leader), but a
// forwarded request costs a hop. The client therefore asks an endpoint for
// GET /v1/cluster, caches the leader's HTTP address, and sends there; an
// answer a follower forwarded names the leader (wire.HeaderLeader), and the
// client sends its next request there. An attempt that could not reach its
// node (refused, reset, timed out: a crashed leader, which the members
// still name until they elect another) goes at once to another endpoint,
// which forwards it, holding it while no leader is known; a round of
// endpoints none of which answered costs a backoff. On a 5xx answer
// (no_leader, outcome_unknown) the client forgets the leader, moves on to
// the next endpoint, asks again, and retries with exponential backoff and
// jitter. An attempt at the leader that has not been answered after a
// second asks the other endpoints who leads (again at doubling intervals up
// to 8 s): once they name another leader, the attempt is given up as one
// whose answer was lost and sent there, so that a leader that hangs without
// closing its connections (a frozen process or host) holds a request only
// until the cluster has elected another, not for the attempt's whole
// timeout. All of it within Retry's attempts and the caller's context.
//
// # What is retried
//
// Reads, renewals and releases are retried freely: repeating them changes
// nothing (a repeated release that finds the lease gone reports success,
// since the first attempt freed it). An acquire carries one random request
// id across all its attempts; the server answers a repeat with the grant it
// already made (existing: true), so a lost answer never costs a second token.
// A fenced write is retried too, but a repeat carries the same token and is
// refused as stale if the first attempt landed: after a lost answer,
// PutFenced reports ErrOutcomeUnknown rather than a misleading ErrStaleToken.
//
// # What is believed
//
// Only a 2xx answer is a success, and no redirect is followed: a fencer node
// never redirects, and a fencing client must not be sent elsewhere
// silently. A grant must name the lock (or semaphore) and holder asked for,
// the request's id, a token from 1 to 2^64-1, a lease secret of
// wire.LeaseSecretLen hexadecimal digits and a TTL no longer than asked; a
// renewal the grant renewed, its token and its TTL; a fenced write the key
// and token sent. An answer that is not the JSON the contract says, that
// does not match, or that is longer than WithMaxAnswerBytes (read no
// further than that) is ErrBadAnswer, and is not retried. A renewal that
// gets one confirms nothing: renewals that keep getting them leave the
// lease to its local deadline. Every call is bounded by its context, the
// reading of each answer included; WithTimeout bounds each attempt.
//
// # Leases and the local deadline
//
// The server starts or extends a lease when it handles the request, which is
// never before the client sent it. So the client measures each lease from the
// send time of its last confirmed renewal (or of the acquire) on the
// monotonic clock, and declares it lost at that time plus TTL minus a safety
// margin (Margin: TTL/10, at least 50ms), before the server could expire it.
//
// # Where a grant's lease starts
//
// The leader starts a grant's lease after it applies the granting entry, and
// a new leader restarts every lease at its full TTL when it takes over, later
// still. The client needs a time no later than that. The send time of the
// acquire is one, but after a wait in the queue it is useless: the grant was
// made when the previous holder released or expired, perhaps longer than a
// TTL after the send, and measured from the send a fresh grant would look
// expired at once. For a retry answered with an earlier grant (existing:
// true) only the first attempt's send time is safe, since the grant may
// have been made for any attempt, and slow retries age it the same way.
//
// When the send time of the acquire is older than TTL/3 as the grant
// arrives, Acquire renews once before it returns the lease and starts the
// lease from that renewal's send time (DESIGN.md says which other bounds
// were weighed). A renewal the server accepts extends the lease to a full
// TTL from when it handles it, after the send: the argument of every
// renewal, which holds across leader changes and asks nothing of the server.
// It costs one quorum round per late grant. This first renewal is not bound
// by the stale deadline (an accepted renewal proves the lease current
// whenever it was sent) but by the caller's context and a TTL after the
// grant arrived: the server started the lease before it answered, so by then
// it has expired it unless a new leader restarted it.
//
// If that renewal fails (refused, no node answers, the caller's context
// ends), Acquire releases the grant with its secret, so that the lock is not
// left held for a TTL by nobody, and returns the error, saying whether the
// release worked. An acquire whose answer never arrives leaves the client
// without the secret: a grant it may have made expires after its TTL.
//
// # Renewals
//
// Renewals go out at about TTL/3 with jitter, so two can fail before the
// deadline; each is retried across nodes until it is answered or the
// deadline passes. A refused renewal (410 lease_lost, or 410 revoked: an
// operator revoked the grant, ErrRevoked, which matches ErrLeaseLost too)
// ends the lease at once; a session's ends the session and every lease
// under it.
//
// # Sessions
//
// A session is one lease for many grants (NewSession): Lock, AcquirePermit
// and Campaign on it acquire with the session's id and secret instead of a
// TTL, and each grant has a token and secret of its own (for fencing and
// Release) but lives as long as the session. Only the session is renewed,
// by the same keep-alive and local-deadline rules as a grant's lease, from
// the send time of its creation or last confirmed renewal; a grant under
// it runs no keep-alive (the server refuses a renewal of such a grant,
// 409 session_grant), and its Deadline, Done and Err are the session's,
// or its own once released. Releasing one grant keeps the session and the
// others; Close ends them all in one entry and returns them. The server
// ends a session, and everything under it, at once: a client whose
// session's Done has closed must assume every grant under it is gone.
//
// The deadline is enforced by a timer and also checked whenever Err, Done or
// Context is called, so a process that was paused (GC, SIGSTOP, a stalled VM)
// past its deadline sees the loss on its first look, before any timer runs.
// Go's monotonic clock does not advance while the machine is suspended; a
// suspended client can therefore believe in a lease the cluster has expired.
// That is what fencing tokens are for: the lease is advisory, the token is
// the guarantee.
package client
