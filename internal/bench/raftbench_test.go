package bench

import (
	"context"
	"fmt"
	"io"
	"net"
	"path/filepath"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"

	"github.com/fencer-io/fencer/cluster/logstore"
	"github.com/fencer-io/fencer/internal/bench/load"
)

// BenchmarkRaftApply measures what hashicorp/raft alone commits on this
// machine: a 3-node group on loopback TCP with each log store fencer offers
// (logStores, opened as fencer opens them), fsync on, and the settings of
// cluster (BatchApplyCh, MaxAppendEntries 256, a LogCache of 1024 entries),
// applying entries the size of a fencer acquire to an FSM that does nothing.
// Each writer waits for its entry to commit before sending the next, as a
// fencer client does. The commits/s metric is the ceiling for fencer, whose
// lock cycle costs two commits.
//
//	go test -run '^$' -bench RaftApply -benchtime 5s ./internal/bench/
//	go test -run '^$' -bench 'RaftApply/store=bolt' ./internal/bench/
func BenchmarkRaftApply(b *testing.B) {
	for _, store := range logStores {
		b.Run("store="+string(store), func(b *testing.B) { benchmarkRaftApply(b, store) })
	}
}

// logStores are the log stores the raw-Raft benchmark measures: every kind
// fencer offers (--log-store).
var logStores = logstore.Kinds

// openLogStore opens a log store of the given kind in dir as a fencer node
// does (logstore.Open), closed when b ends.
func openLogStore(b *testing.B, kind logstore.Kind, dir string) logstore.Store {
	store, err := logstore.Open(dir, kind, hclog.NewNullLogger())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { store.Close() })
	return store
}

func benchmarkRaftApply(b *testing.B, store logstore.Kind) {
	leader := startRaftGroup(b, 3, store)
	entry := make([]byte, 200) // about a JSON acquire with its lease secret and request id
	for _, writers := range []int{1, 16, 64} {
		b.Run(fmt.Sprintf("writers=%d", writers), func(b *testing.B) {
			// Measured by package load, as fencer's workloads are, so that
			// the latencies compare: p50-ms beside fencer's.
			apply := func(context.Context, int) (load.Op, func(), error) {
				return func(context.Context) error { return leader.Apply(entry, 5*time.Second).Error() }, nil, nil
			}
			res, err := load.Run(context.Background(), load.Config{Clients: writers, Duration: time.Hour, Ops: int64(b.N)}, apply)
			if err != nil {
				b.Fatal(err)
			}
			if res.Errors > 0 {
				b.Fatalf("%d applies failed, first: %s", res.Errors, res.FirstError)
			}
			b.ReportMetric(res.OpsPerSec, "commits/s")
			b.ReportMetric(res.P50Ms, "p50-ms")
		})
	}
}

type nopFSM struct{}

func (nopFSM) Apply(*raft.Log) any                 { return nil }
func (nopFSM) Snapshot() (raft.FSMSnapshot, error) { return nopSnapshot{}, nil }
func (nopFSM) Restore(rc io.ReadCloser) error      { return rc.Close() }

type nopSnapshot struct{}

func (nopSnapshot) Persist(sink raft.SnapshotSink) error { return sink.Close() }
func (nopSnapshot) Release()                             {}

// startRaftGroup starts n raft nodes on 127.0.0.1 in temp dirs, with log
// stores of the named kind, and returns the leader once one is elected.
// Everything is shut down when b ends.
func startRaftGroup(b *testing.B, n int, kind logstore.Kind) *raft.Raft {
	b.Helper()
	logger := hclog.New(&hclog.LoggerOptions{Level: hclog.Error, Output: io.Discard})
	var (
		nodes   []*raft.Raft
		servers []raft.Server
		configs []*raft.Config
		logs    []raft.LogStore
		stables []raft.StableStore
		snaps   []raft.SnapshotStore
		trans   []*raft.NetworkTransport
	)
	for i := range n {
		dir := b.TempDir()
		store := openLogStore(b, kind, dir)
		snap, err := raft.NewFileSnapshotStoreWithLogger(filepath.Join(dir, "snapshots"), 2, logger)
		if err != nil {
			b.Fatal(err)
		}
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			b.Fatal(err)
		}
		addr := ln.Addr().String()
		ln.Close()
		tr, err := raft.NewTCPTransportWithConfig(addr, nil, &raft.NetworkTransportConfig{MaxPool: 4, Timeout: 5 * time.Second, Logger: logger})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { tr.Close() })
		rc := raft.DefaultConfig()
		rc.LocalID = raft.ServerID(fmt.Sprintf("r%d", i+1))
		rc.Logger = logger
		rc.HeartbeatTimeout = time.Second
		rc.ElectionTimeout = time.Second
		rc.LeaderLeaseTimeout = 500 * time.Millisecond
		rc.SnapshotThreshold = 8192
		rc.TrailingLogs = 10240
		rc.SnapshotInterval = 30 * time.Second
		rc.BatchApplyCh = true
		rc.MaxAppendEntries = 256
		configs, snaps, trans = append(configs, rc), append(snaps, snap), append(trans, tr)
		logs, stables = append(logs, store), append(stables, store)
		servers = append(servers, raft.Server{ID: rc.LocalID, Address: tr.LocalAddr()})
	}
	for i := range n {
		cache, err := raft.NewLogCache(1024, logs[i])
		if err != nil {
			b.Fatal(err)
		}
		r, err := raft.NewRaft(configs[i], nopFSM{}, cache, stables[i], snaps[i], trans[i])
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { r.Shutdown().Error() })
		if err := r.BootstrapCluster(raft.Configuration{Servers: servers}).Error(); err != nil {
			b.Fatal(err)
		}
		nodes = append(nodes, r)
	}
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		for _, r := range nodes {
			if r.State() == raft.Leader {
				if err := r.Barrier(5 * time.Second).Error(); err != nil {
					b.Fatal(err)
				}
				return r
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	b.Fatal("no raft leader elected in 20s")
	return nil
}
