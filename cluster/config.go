package cluster

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/hashicorp/raft"

	"github.com/fencer-io/fencer/api/wire"
	"github.com/fencer-io/fencer/cluster/internal/membership"
	"github.com/fencer-io/fencer/cluster/logstore"
)

// Peer is one member of an initial cluster.
type Peer struct {
	ID       string
	RaftAddr string
	HTTPAddr string
}

// ParseInitialCluster parses "n1=RAFT@HTTP,n2=RAFT@HTTP,…".
func ParseInitialCluster(s string) ([]Peer, error) {
	var peers []Peer
	seen := map[string]bool{}
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		id, addrs, ok := strings.Cut(part, "=")
		raftAddr, httpAddr, ok2 := strings.Cut(addrs, "@")
		if !ok || !ok2 || id == "" || raftAddr == "" || httpAddr == "" {
			return nil, fmt.Errorf("initial cluster entry %q: want ID=RAFT_ADDR@HTTP_ADDR", part)
		}
		if seen[id] {
			return nil, fmt.Errorf("initial cluster: id %q listed twice", id)
		}
		seen[id] = true
		peers = append(peers, Peer{ID: id, RaftAddr: raftAddr, HTTPAddr: httpAddr})
	}
	if len(peers) == 0 {
		return nil, errors.New("initial cluster is empty")
	}
	return peers, nil
}

// DefaultElectionTimeout is Raft's heartbeat, election and leader-lease
// timeout unless configured otherwise (fencer serve --election-timeout).
//
// The heartbeat timeout is how long a follower goes without hearing from
// the leader before it stands for election. Raft checks at random
// intervals of one to two timeouts, and a follower that still knows a
// leader refuses to vote, so after a crash both followers of a 3-node
// cluster must time out: a new leader takes about two timeouts (one and a
// half to two and a half), which is most of what a crash costs clients.
// The leader sends heartbeats ten times per timeout, apart from the disk,
// so only a stall of nearly a whole timeout, of a process or of the
// network (two lost packets in a row, with TCP's 200 ms retransmission),
// deposes a healthy leader. 400 ms keeps clear of a loaded 2-core
// machine's scheduling stalls and of a LAN's latency, and replaces a
// crashed leader in under a second, where 1 s (hashicorp/raft's default)
// took about two; on a lossy network, across regions, or with long pauses
// of the process, raise it. The election timeout bounds a candidate's
// round (a split vote costs one to two more); the leader lease is how long
// a leader cut off from its quorum keeps its role before it steps down.
// None of them touches safety: a new leader restarts every lease at its
// full TTL after its Barrier, and reads and renewals are confirmed by a
// quorum round whatever the timings.
const DefaultElectionTimeout = 400 * time.Millisecond

// Config configures a Node. Zero values mean the defaults.
type Config struct {
	ID       string
	DataDir  string
	RaftAddr string // bind and advertise address of the Raft transport
	HTTPAddr string // advertised HTTP address of this node's API

	// At most one of the three ways to start.
	Bootstrap      bool
	Join           []string // HTTP addresses of members
	InitialCluster []Peer
	// PeerAddrs overrides the address this node dials to reach a peer, by
	// peer id (Raft's ServerAddressProvider; transport.ParsePeerAddrs). The chaos suite routes each
	// link through a fault proxy this way; peers keep advertising their
	// real addresses.
	PeerAddrs map[string]string
	// PeerAddrsFile holds the same map, one ID=HOST:PORT per line or
	// comma-separated; it is re-read whenever it changes, so a harness can
	// route a member added later through a proxy too.
	PeerAddrsFile string
	// PeerTLSServer and PeerTLSClient, when set, run Raft over mutual TLS
	// (tlsutil.PeerConfig) and make node-to-node HTTP calls use https with
	// the node's certificate.
	PeerTLSServer *tls.Config
	PeerTLSClient *tls.Config
	// LookupHost resolves the host names of Raft addresses (this node's, to
	// bind, and its peers', each time it dials them over TCP); nil is the
	// system resolver. Tests give names the system does not know.
	LookupHost func(ctx context.Context, host string) ([]string, error)
	// ClusterSecret is what this node presents to other members' APIs
	// (wire.AuthSchemeNode) when the cluster runs access control without
	// TLS: without it their ACLs refuse its joins, probes and removals.
	// Every member must be given the same one. With TLS the node's
	// certificate serves instead, and the secret is not sent.
	ClusterSecret string
	// NonVoter joins as a non-voting member that only replicates.
	NonVoter bool
	// Replace lets a node whose data dir was wiped take its id back: the
	// leader removes the old incarnation, then adds this one.
	Replace bool

	// Raft timing, all DefaultElectionTimeout by default (see
	// DefaultElectionTimeout for what they trade).
	HeartbeatTimeout   time.Duration
	ElectionTimeout    time.Duration
	LeaderLeaseTimeout time.Duration
	// ApplyTimeout bounds one proposal. Default 5 s.
	ApplyTimeout time.Duration
	// StallTimeout is how long a write of the log store may take on the
	// leader before the node gives up leading and stops (default 5 s):
	// above the slowest fsync the disk is expected to take, below what
	// clients would wait for (see disk.go).
	StallTimeout time.Duration
	// LogStore is the kind of Raft log store a new data dir gets (default
	// bolt); an existing dir must hold this kind (logstore.Choose).
	LogStore logstore.Kind
	// WrapLogStore, when set, wraps the log store under the node's own
	// timing of it. Tests inject disk faults through it
	// (test/diskfault); no flag sets it.
	WrapLogStore func(raft.LogStore) raft.LogStore
	// Snapshots: take one after this many new entries (default 8192), keep
	// this many entries behind it for slow followers (default 10240).
	SnapshotThreshold uint64
	TrailingLogs      uint64
	SnapshotInterval  time.Duration

	// JoinTimeout bounds how long a new node tries to be admitted before it
	// gives up (default 2 min).
	JoinTimeout time.Duration

	Logger *slog.Logger
	// RaftLogLevel is hashicorp/raft's own log level (default "warn").
	RaftLogLevel string
}

// MinStallTimeout is the shortest Config.StallTimeout allowed.
const MinStallTimeout = 100 * time.Millisecond

// Validate checks the configuration and fills in defaults.
//
// It is long because it is a list of independent field checks, one after
// another.
func (c *Config) Validate() error {
	if !wire.ValidNodeID(c.ID) {
		return fmt.Errorf("node id %q: want %s", c.ID, wire.NodeIDRule)
	}
	if c.DataDir == "" {
		return errors.New("data dir is required")
	}
	if c.RaftAddr == "" || c.HTTPAddr == "" {
		return errors.New("raft and http addresses are required")
	}
	ways := 0
	for _, set := range []bool{c.Bootstrap, len(c.Join) > 0, len(c.InitialCluster) > 0} {
		if set {
			ways++
		}
	}
	if ways > 1 {
		return errors.New("give only one of bootstrap, join and initial cluster")
	}
	if len(c.InitialCluster) > 0 {
		found := false
		for _, p := range c.InitialCluster {
			if p.ID == c.ID {
				found = true
			}
		}
		if !found {
			return fmt.Errorf("initial cluster does not list this node's id %q", c.ID)
		}
	}
	def := func(d *time.Duration, v time.Duration) {
		if *d == 0 {
			*d = v
		}
	}
	def(&c.HeartbeatTimeout, DefaultElectionTimeout)
	def(&c.ElectionTimeout, DefaultElectionTimeout)
	def(&c.LeaderLeaseTimeout, min(DefaultElectionTimeout, c.HeartbeatTimeout))
	def(&c.ApplyTimeout, 5*time.Second)
	def(&c.StallTimeout, 5*time.Second)
	def(&c.SnapshotInterval, 30*time.Second)
	def(&c.JoinTimeout, 2*time.Minute)
	kind, err := logstore.ParseKind(string(c.LogStore))
	if err != nil {
		return err
	}
	c.LogStore = kind
	if c.StallTimeout < MinStallTimeout {
		return fmt.Errorf("stall timeout %v: want at least %v, or a healthy leader's slower fsyncs would depose it", c.StallTimeout, MinStallTimeout)
	}
	if c.SnapshotThreshold == 0 {
		c.SnapshotThreshold = 8192
	}
	if c.TrailingLogs == 0 {
		c.TrailingLogs = 10240
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.RaftLogLevel == "" {
		c.RaftLogLevel = "warn"
	}
	return nil
}

// start is what the start plan needs of the configuration, with what the
// data dir says: whether it holds Raft state, and the cluster it records.
func (c *Config) start(hasState bool, clusterID string) membership.Start {
	s := membership.Start{ID: c.ID, DataDir: c.DataDir, Bootstrap: c.Bootstrap, Join: len(c.Join) > 0, HasState: hasState, ClusterID: clusterID}
	for _, p := range c.InitialCluster {
		s.Initial = append(s.Initial, raft.Server{ID: raft.ServerID(p.ID), Address: raft.ServerAddress(p.RaftAddr)})
	}
	return s
}
