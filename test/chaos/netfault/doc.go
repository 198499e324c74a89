// Package netfault injects network faults between Raft nodes without root:
// no iptables, no tc, just a TCP proxy per directed link.
//
// # Model
//
// In the chaos suite every node dials every peer through a proxy of its
// own. Link (from → to) listens on 127.0.0.1:0 and forwards to to's real
// Raft address, so the harness can break from's view of to without touching
// anyone else's. A Net holds the full mesh and offers the usual shapes:
// Isolate, Partition, CutOneWay, DelayAll, HealAll.
//
// The faults act on open connections, not only new ones. That matters for
// hashicorp/raft, whose NetworkTransport pools connections and streams
// AppendEntries over a long-lived pipeline: a fault that spared existing
// connections would not partition anything.
//
//   - Cut resets open connections and resets new ones on arrival. The
//     transport sees ECONNRESET at once instead of waiting out its timeout,
//     which keeps tests fast; Raft's behaviour does not depend on which
//     kind of failure it sees, only on when.
//   - CutOneWay silently drops one direction of the byte stream: the
//     connection stays up and the caller waits for a reply that never
//     comes, so only the transport's Timeout ends the RPC. Chaos clusters
//     should set a short NetworkTransportConfig.Timeout (about a second).
//   - Delay holds each chunk for the given time in both directions, in
//     order; a round trip takes at least twice the delay.
//   - Heal clears all of the above for new connections. Connections that
//     were reset stay closed and connections that lost bytes are reset,
//     since a Raft stream with a hole in it is garbage.
//
// # Wiring a node
//
// A node keeps advertising its real address in the Raft configuration; only
// its outgoing dials are redirected. hashicorp/raft resolves the address to
// dial for a peer through NetworkTransportConfig.ServerAddressProvider,
// which maps a ServerID to a ServerAddress and falls back to the address in
// the configuration when it returns an error. The intended wiring:
//
//	net, _ := netfault.NewNet(map[string]string{"n1": a1, "n2": a2, "n3": a3})
//	// start n1 with: --peer-proxy n2=<net.Addr("n1","n2")>,n3=<net.Addr("n1","n3")>
//	// (net.PeerAddrs("n1") gives that map), and inside the node:
//	cfg := &raft.NetworkTransportConfig{
//		Stream:                stream,
//		Timeout:               time.Second,
//		ServerAddressProvider: peerProxies, // ServerAddr(id) looks id up in the flag's map
//	}
//
// Peers missing from the map fall back to their real address, so a node
// added by a membership change must be given its proxies (Net.AddNode, then
// the new map) or it will bypass the faults. When a node restarts on a new
// port, Net.SetTarget repoints the links into it; its peers' maps stay
// valid because the proxy addresses do not change.
//
// The flag itself belongs to cmd/ and cluster/; this package only provides
// the proxies.
//
// # HTTP: one address for everybody
//
// Raft lets each node dial a peer where it is told to; HTTP does not. A
// node advertises one API address, and every node forwarding to the leader
// and every client that asked GET /v1/cluster who leads dials that same
// address. The destination alone cannot say whose link a connection is on,
// so the advertised address is a Gate (fencer serve --http-advertise-addr
// names it) and the Gate asks who dialed: DialerPID finds, in
// /proc/net/tcp, the socket whose local address is the connection's remote
// one, and the candidate process whose /proc/PID/fd links to it. The Gate
// then hands the connection to that source's Link into the node, so Cut,
// CutOneWay and Delay act per (source, node) pair exactly as on the Raft
// side. HTTPMesh holds the gates and one Link per pair; a Link keeps its
// own listener too, which a client can be given as its endpoint. A
// connection no one can attribute (its dialer already closed it, or the
// platform has no /proc) goes through unfaulted and is counted, so that a
// run can tell its cuts held.
package netfault
