// Package nemesis injects the chaos suite's faults into a running cluster:
// the fault kinds, the shuffled deck they are dealt from, stacking a second
// fault within a minority of the members, and healing.
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
// and to one of TestChaosShort's lists (test/chaos/chaos_test.go).
package nemesis
