package cluster

import (
	"crypto/ed25519"
	"errors"
	"fmt"
	"os"

	"github.com/hashicorp/raft"

	"github.com/fencer-io/fencer/api/wire"
	"github.com/fencer-io/fencer/cluster/datadir"
	"github.com/fencer-io/fencer/cluster/internal/membership"
	"github.com/fencer-io/fencer/cluster/internal/peers"
	"github.com/fencer-io/fencer/cluster/logstore"
	"github.com/fencer-io/fencer/cluster/stall"
	"github.com/fencer-io/fencer/cluster/transport"
)

// Startup is a sequence of small steps. Each records on the Node what it
// opened or started, so that a failure at any step goes through the one
// cleanup path, shutdown (which Close uses too): it stops what runs and
// closes what was opened, whichever steps completed.

// start runs the startup steps in order.
func (n *Node) start() error {
	if err := os.MkdirAll(n.cfg.DataDir, datadir.DirMode); err != nil {
		return fmt.Errorf("data dir: %w", err)
	}
	lock, err := datadir.TryLock(n.cfg.DataDir)
	if err != nil {
		return err
	}
	n.dirLock = lock
	if err := datadir.MakePrivate(n.cfg.DataDir, n.log); err != nil {
		return err
	}
	ident, err := datadir.LoadIdentity(n.cfg.DataDir, n.cfg.ID)
	if err != nil {
		return err
	}
	kind, err := logstore.Choose(n.cfg.DataDir, &ident, n.cfg.LogStore)
	if err != nil {
		return err
	}
	n.ident = ident
	key, err := datadir.LoadMemberKey(n.cfg.DataDir)
	if err != nil {
		return err
	}
	n.memberKey = wire.MemberKeyString(key.Public().(ed25519.PublicKey))
	n.peers = peers.New(n.cfg.ID, peers.Credentials{Secret: n.cfg.ClusterSecret, TLS: n.cfg.PeerTLSClient, Key: key, Keyed: n.keyRecorded})
	if err := n.openStores(kind); err != nil {
		return err
	}
	if err := n.openTransport(); err != nil {
		return err
	}
	hasState, err := raft.HasExistingState(n.store, n.store, n.snaps)
	if err != nil {
		return fmt.Errorf("inspect raft state: %w", err)
	}
	start := n.cfg.start(hasState, n.ident.ClusterID)
	var view membership.View
	if start.NeedsProbe() {
		view = n.peers.Probe(n.ctx, n.peerHTTPAddrs())
	}
	plan, err := start.Plan(view, n.trans.LocalAddr())
	if err != nil {
		return err
	}
	if plan.PreJoin {
		if len(n.cfg.InitialCluster) > 0 {
			n.log.Warn("data dir is empty but the initial cluster already runs: joining it instead of bootstrapping")
		}
		if err := n.preJoin(); err != nil {
			return err
		}
	}
	if err := n.startRaft(); err != nil {
		return err
	}
	if hasState {
		n.log.Info("restarting with existing state", "last_index", n.raft.LastIndex())
		return nil
	}
	return n.bootstrap(plan.Bootstrap)
}

// logCacheSize is how many of the newest log entries stay in memory: more
// than two full AppendEntries batches (MaxAppendEntries is 256).
const logCacheSize = 1024

// openStores opens the log and stable store of the data dir's kind, the
// cache in front of it, and the snapshot store.
func (n *Node) openStores(kind logstore.Kind) error {
	store, err := logstore.Open(n.cfg.DataDir, kind, n.raftLog)
	if err != nil {
		return fmt.Errorf("open raft store: %w", err)
	}
	n.store = store
	if n.snaps, err = datadir.OpenSnapshots(n.cfg.DataDir, n.raftLog); err != nil {
		return fmt.Errorf("open snapshot store: %w", err)
	}
	// The cache keeps the newest entries in memory, so the leader's
	// replication and every member's FSM read what was just written without
	// a store read and a decode per entry (with bolt, about a tenth of each
	// node's CPU under load, by profile).
	var logs raft.LogStore = store
	if n.cfg.WrapLogStore != nil {
		logs = n.cfg.WrapLogStore(logs)
	}
	n.logWatch = stall.NewLog(logs, n.metrics.LogWrites, n.diskFailed)
	if n.logs, err = raft.NewLogCache(logCacheSize, n.logWatch); err != nil {
		return fmt.Errorf("raft log cache: %w", err)
	}
	return nil
}

// openTransport binds the Raft transport.
func (n *Node) openTransport() error {
	trans, err := transport.Open(transport.Config{
		Addr:          n.cfg.RaftAddr,
		TLSServer:     n.cfg.PeerTLSServer,
		TLSClient:     n.cfg.PeerTLSClient,
		PeerAddrs:     n.cfg.PeerAddrs,
		PeerAddrsFile: n.cfg.PeerAddrsFile,
		LocalID:       n.cfg.ID,
		LookupHost:    n.cfg.LookupHost,
		RaftLogger:    n.raftLog,
		Logger:        n.log,
	})
	if err != nil {
		return err
	}
	n.trans = trans
	return nil
}

// raftConfig is hashicorp/raft's configuration for this node.
func (n *Node) raftConfig(notify chan bool) *raft.Config {
	rc := raft.DefaultConfig()
	rc.LocalID = raft.ServerID(n.cfg.ID)
	rc.Logger = n.raftLog
	rc.HeartbeatTimeout = n.cfg.HeartbeatTimeout
	rc.ElectionTimeout = n.cfg.ElectionTimeout
	rc.LeaderLeaseTimeout = n.cfg.LeaderLeaseTimeout
	rc.SnapshotThreshold = n.cfg.SnapshotThreshold
	rc.TrailingLogs = n.cfg.TrailingLogs
	rc.SnapshotInterval = n.cfg.SnapshotInterval
	rc.BatchApplyCh = true
	rc.MaxAppendEntries = 256
	rc.NotifyCh = notify
	return rc
}

// startRaft starts Raft over the stores and transport, the goroutine that
// follows its leadership changes, and the one that watches its disk.
func (n *Node) startRaft() error {
	notify := make(chan bool, 16)
	r, err := raft.NewRaft(n.raftConfig(notify), n.metrics.TimeSnapshots(n.fsm), n.logs, n.store, n.snaps, n.trans)
	if err != nil {
		return fmt.Errorf("start raft: %w", err)
	}
	n.raft = r
	n.metrics.Watch(r, raft.ServerID(n.cfg.ID))
	n.observeLeader()
	n.wg.Add(2)
	go n.watchLeadership(notify)
	go n.watchDisk()
	return nil
}

// bootstrap writes the first configuration, if there is one to write.
func (n *Node) bootstrap(servers []raft.Server) error {
	if servers == nil {
		return nil
	}
	n.log.Info("bootstrapping a new cluster", "members", len(servers))
	if err := n.raft.BootstrapCluster(raft.Configuration{Servers: servers}).Error(); err != nil && !errors.Is(err, raft.ErrCantBootstrap) {
		return fmt.Errorf("bootstrap: %w", err)
	}
	n.bootstrapped.Store(true)
	return nil
}
