// Package harness runs the chaos suite's processes: real `fencer serve`
// nodes, the example fenced resource, and client processes, all on
// 127.0.0.1, each logging to a file of its own.
//
// Every process is started through a Group, which can kill all of them by
// pid; tests register Group.KillAll with t.Cleanup so that nothing outlives
// a run, whatever happens. Processes are also started with a parent-death
// signal, so they die with the harness even if it is killed itself.
//
// # Addresses
//
// A node that is killed and restarted must come back on the same Raft
// address (the cluster's configuration names it) and the same HTTP address
// (clients and peers know it). Ports are therefore chosen once, below the
// kernel's ephemeral range, so that while a node is down its port is not
// handed to some outgoing connection that would block its restart. The
// Raft traffic between nodes goes through netfault proxies: each node's
// --peer-proxy-file maps every other node's id to the proxy it must dial.
// HTTP traffic goes through netfault's HTTPMesh: a node listens on its
// HTTPAddr, which only the harness dials (so the harness's view is never
// cut), and advertises its Gate (--http-advertise-addr, and the HTTP part
// of --initial-cluster and --join), which every other node and client
// dials once it has learned of it; the Gate asks the kernel which of the
// group's processes made each connection (netfault.DialerPID) and applies
// that process's link. Clients are also given links of their own to every
// node as their endpoints (ClientEndpoints). Partition cuts Raft and HTTP
// alike.
//
// # The resource's log
//
// The resource is reached through a small proxy in the harness that writes
// to one key at a time and records the mark the resource answers for every
// write it accepted, in order: the resource's own account of what it let
// through, which the checker's fence-order invariant reads.
package harness
