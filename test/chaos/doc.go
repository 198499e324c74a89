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
// # How a run goes
//
// Run starts the cluster, the resource and the clients, lets the nemesis
// inject faults until the duration is spent, heals everything, stops the
// clients, takes final reads of every key, waits for every lease to end and
// for every member to reach the same applied index, collects the members'
// state digests, and checks.
//
// Faults are dealt from a shuffled deck, so that a short run meets many
// kinds before any repeats, and everything random derives from the seed,
// which is printed. A replay with the same seed deals the same faults in
// the same order with the same parameters as long as the cluster answers
// alike; the interleaving with the clients' calls is up to the scheduler.
//
// # What the network faults cut
//
// Every link is proxied (package netfault), so a partition cuts what it
// would cut in a real network. Raft between nodes goes through one proxy
// per directed pair (--peer-proxy-file). HTTP goes through a Gate at each
// node's advertised address (--http-advertise-addr, also named in
// --initial-cluster and --join): a node forwarding to the leader, a joiner,
// and a client that learned the leader's address from GET /v1/cluster all
// dial it, and the Gate hands each connection to the link of the process
// that dialed it. Each client also has links of its own into every node,
// which are its endpoints. So a split cuts Raft and HTTP between the sides
// and leaves each client on one side; client-cut cuts clients off the
// leader but not off the followers, which forward for them; http-cut cuts
// followers' HTTP to the leader while their Raft stays up. The summary
// counts the connections the Gates attributed (none should go
// unattributed) and what the cuts refused.
//
// # Stacked faults
//
// With Config.StackChance a second fault joins the first while it holds;
// each heals when its own hold ends, in either order. Two rules bound the
// pair (see budget and stackable in nemesis.go): together they disturb at
// most a minority of the members, so a majority stays running, connected
// and whole throughout: a leader exists, a stacked fault's own steps (a
// removal, a join, a wiped member's refusal) can commit, and once both heal
// the cluster recovers as from one. And two faults never pull one lever
// (the network, the configuration, the resource) except kills and pauses
// of different members. With 3 members one of the pair must disturb no
// member (an HTTP cut, a delay, a client pause); with 5 a partition of one
// and a kill, or a pause and a membership change, stack. kill-all, which
// takes the whole cluster down, never stacks. Losing quorum for the rest
// of a run would check nothing.
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
//
// # Disk faults
//
// The suite builds fencer with -tags diskfault, which wraps each member's
// log store in test/diskfault's Store, switched through a file beside its
// data dir (harness.Cluster.SetDisk; the member acknowledges each switch,
// so a binary without the tag makes the fault incomplete rather than
// silently absent). disk-stall hangs the writes of the leader (or of a
// follower, which must only fall behind); disk-full fails a member's
// writes with ENOSPC. The members run with --stall-timeout 2s. A stalled
// leader, and any member whose writes fail, must exit on its own within
// harness.StallTimeout+10s, or the run has a problem; the heal makes the
// disk healthy and restarts it on its data dir (a restart event for the
// checker). They pull the process lever and stack like a kill.
//
// # Adding a fault kind
//
// A fault is one entry in kinds (nemesis.go) and one inject function: the
// entry says which lever it pulls and how many members it disturbs while
// active, which is all the stacking rules need; inject puts it in place
// and returns how long to hold it, how to heal it and which members it
// acts on (diskfaults.go is a short example). Add its name to AllFaults
// and to one of TestChaosShort's lists.
package chaos
