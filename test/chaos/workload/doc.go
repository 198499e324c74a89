// Package workload is the chaos suite's client: a loop that takes locks,
// writes through the external resource and the cluster's fenced key-value
// store with the token, reads, and releases, recording every call.
//
// A client has one role (Config.Role): locks as above; a semaphore's
// permits (acquire, hold, maybe renew, release); or an election, where it
// campaigns, writes with its term while it leads, proclaims, resigns, and
// meanwhile observes the election, reporting each leadership it is told of
// as an observe line; or sessions, where it holds its locks and a permit
// under one session, renewed from a goroutine of its own, and closes it or
// stalls past its TTL (sessions.go).
//
// # Why clients are processes
//
// A client paused past its lease is the scenario fencing exists for, and
// the harness reproduces it with SIGSTOP. A goroutine cannot be stopped
// like that, so each client runs as its own process (the chaos test binary
// re-executed with a configuration in its environment; see Main) and
// streams its history to the harness as JSON lines on stdout.
//
// # Recording
//
// Every operation is announced before it is sent (an invoke line) and
// reported when it returns (a complete line). An operation that was invoked
// but never completed (the process was killed, or the run ended while it
// was in flight) is recorded as unknown, returning at the end of the
// history: it may or may not have happened. Times come from
// CLOCK_MONOTONIC, which every process on the machine shares and which
// keeps running while a process is stopped, so the harness's events and
// every client's operations sit on one clock.
//
// The client deliberately behaves like a careless holder: it writes with
// its token whether or not its lease is still valid, so that writes made
// after a pause reach the fences, which must refuse them.
package workload
