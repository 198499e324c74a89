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
// a broken resource, which must fail). TestChaosShort (30s of faults on 3
// nodes, then 30s on 5) and TestChaosBrokenResource (the negative control,
// which asserts that the checker flags a resource that forgets its fence on
// restart) run with every `go test ./...` unless -short.
//
// Clients are this test binary run again with workload.ConfigEnv set
// (TestMain); fencer is built from the tree once per test binary, or taken
// from FENCER_BIN.
//
// # How a run goes
//
// Run starts the cluster, the resource and the clients, lets the nemesis
// inject one fault at a time (each held for a while, then healed, then the
// cluster is given time to become healthy again) until the duration is
// spent, heals everything, stops the clients, takes final reads of every
// key, waits for every lease to end and for every member to reach the same
// applied index, collects the members' state digests, and checks.
//
// Faults are dealt from a shuffled deck, so that a short run meets many
// kinds before any repeats, and everything random derives from the seed,
// which is printed. A replay with the same seed injects the same faults in
// the same order with the same parameters; the interleaving with the
// clients' calls is up to the scheduler.
//
// The nemesis heals each fault before the next, rather than stacking
// faults, because a cluster that loses quorum for the rest of a run checks
// nothing; the faults it does combine (a client paused across a resource
// restart, a member replaced while clients work) are the ones that matter
// for fencing.
package chaos
