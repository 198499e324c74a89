// Package chaos runs fencer's chaos suite: a real cluster of `fencer serve`
// processes, the example fenced resource, and client processes working
// through both, while a nemesis kills, pauses, partitions and reconfigures
// the cluster. Every call is recorded and the history is judged by package
// checker.
//
// # Entry points
//
// The suite is driven by go test (see chaos_test.go). The long run, for
// `make chaos`, is skipped unless given a duration:
//
//	go test ./test/chaos/ -run '^TestChaos$' -count=1 -timeout 0 -v \
//		-chaos.duration=10m -chaos.seed=N -chaos.nodes=3 -chaos.artifacts=DIR
//
// (or CHAOS_DURATION, CHAOS_SEED, CHAOS_NODES, CHAOS_ARTIFACTS in the
// environment; -chaos.faults picks faults, -chaos.broken-fence runs against
// a broken resource, which must fail, -chaos.witness names the soak's
// witness). `make chaos DURATION=30m NODES=5` runs it. TestChaosShort (30s
// of faults on 3 nodes, then 30s on 5) and TestChaosBrokenResource (20s:
// the negative control, which asserts that the checker flags a resource
// that forgets its fence on restart) run with every `go test ./...` unless
// -short: 80s of faults in all.
//
// Clients are this test binary run again with workload.ConfigEnv set
// (TestMain); fencer is built from the tree once per test binary, or taken
// from FENCER_BIN.
//
// # Clients
//
// Besides the lock clients (Config.Clients, default nodes+1), every run
// has semaphore clients (Config.SemClients, default 3) taking permits of
// one semaphore of limit 2 (some with a lock-delay, which delays the slot
// of a permit a pause lets expire), and campaigners (Config.Campaigners, default
// 2) that campaign in one election, write to the resource with their term
// while they lead, proclaim new values, resign, and observe the election
// all along. A client pause may catch any of them holding: a paused
// leader's writes on waking must be refused like a paused lock holder's.
// The checker judges the permits against the limit, each term's leader,
// and the observers' order (see package checker).
//
// Session clients (Config.SessionClients, default 3) each open a session
// over plain HTTP (workload.RawAPI: the server's answers, not a client
// library's), take every one of sessionLocks and a permit of
// sessionSemaphore under it, renew only the session, write with every
// grant's token (through the resource, and a put bound to the lock), and
// close it; some iterations, by the seed, stall past the session's TTL and
// write with the old tokens on waking. The watcher records, besides the
// grants, every grant's end, every session event and every accepted put,
// with its index, so that the checker can judge that a session's grants
// end in its one end entry, that no lock-bound write with its tokens is
// accepted after it, and that none of its grants outlives it.
//
// Lock clients sometimes act as an operator (workload/revoke.go): they read
// one of their locks and revoke the grant another client holds, which goes
// on writing with its token until its next renewal is refused revoked; the
// checker judges that its lock-bound writes after the revoke are refused
// (checker.RevokedWrites), and the lock model reads each revoke as an
// expiry the operator asked for.
//
// RW clients (Config.RWClients, default 3) take rwLocks shared (mostly) or
// exclusive, some waiting in the FIFO, hold and release; the checker finds
// any exclusive grant certainly live beside another grant of its lock
// (checker.RWExclusion).
//
// Durable clients (Config.DurableClients, default 2) are rw clients whose
// waiting acquires are durable waiters (issue 28) on durableLocks,
// exclusive mostly: their places are in the log, and the Go client retries
// them with one request id through leader changes. The checker finds any
// two granted out of their enqueue order (checker.DurableOrder), and
// RWExclusion judges their grants as any rw client's.
//
// # How a run goes
//
// Run starts the cluster, the resource and the clients, lets the nemesis
// inject faults until the duration is spent, heals everything, stops the
// clients, takes final reads of every key, waits for every lease to end and
// for every member to reach the same applied index, collects the members'
// state digests, and checks.
//
// The nemesis (package nemesis, whose doc says what each kind of fault
// does and how they stack) deals faults from a shuffled deck, so that a
// short run meets many kinds before any repeats, and everything random derives from the seed,
// which is printed. A replay with the same seed deals the same faults in
// the same order with the same parameters as long as the cluster answers
// alike; the interleaving with the clients' calls is up to the scheduler.
//
// # Soak
//
// The nemesis samples every member's process_resident_memory_bytes,
// process_open_fds and go_goroutines from /metrics whenever the cluster is
// healthy again, and once more at the end under load. The summary shows
// each node at the start of the steady state, half-way and at the end, and
// judges each node process (a restart starts a new one) that was sampled
// for soakMinSpan after its first soakSettle: its growth must stay within
// soakBounds (see soak.go for the bounds and why), or the run fails. From
// 5 minutes (soakFrom) TestChaos spares one member, the witness (n1), from
// kills, wipes and removals, so that one process lives the whole run and
// is judged; kill-all then kills the others. Short runs judge nothing.
package chaos
