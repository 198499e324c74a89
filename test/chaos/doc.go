// Package chaos runs fencer's chaos suite: a real cluster of `fencer serve`
// processes, the example fenced resource, and client processes working
// through both, while a nemesis kills, pauses, partitions and reconfigures
// the cluster. Every call is recorded and the history is judged by package
// checker.
//
// # Entry points
//
// The suite is driven by go test (see chaos_test.go):
//
//	go test ./test/chaos/ -run '^TestChaos$' -count=1 -timeout 0 -v -chaos.duration=10m -chaos.seed=N
//
// runs one long run; TestChaosShort (a short run on 3 and then 5 nodes)
// and TestChaosBrokenResource (the negative control, which must fail the
// checker) run with every `go test ./...`.
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
