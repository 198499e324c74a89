package bench

import (
	"fmt"
	"log/slog"
	"runtime"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"

	"github.com/fencer-io/fencer/fsm"
	"github.com/fencer-io/fencer/fsm/entry"
)

// BenchmarkSnapshot100k measures the state machine at scale: 100,000 held
// leases (each with its remembered request id, as a real acquire leaves),
// then a raft snapshot of it written to a file snapshot store, and a restore
// into a fresh FSM, as a restarted or lagging node does. Metrics: heap of
// the state, snapshot bytes, persist and restore time. The cluster-level
// part (RSS per node, a restarted node's time to ready) is
// scripts/bench-scale.sh.
//
//	go test -run '^$' -bench Snapshot100k -benchtime 1x ./bench/
func BenchmarkSnapshot100k(b *testing.B) {
	const leases = 100_000
	logger := slog.New(slog.DiscardHandler)
	var before runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	f := fsm.New(logger)
	for i := range leases {
		res := f.ApplyCommand(&entry.Acquire{
			Lock:      fmt.Sprintf("scale-%06d", i),
			Holder:    "bench-holder",
			Lease:     randomHex(16),
			TTLMillis: 3_600_000,
			RequestID: randomHex(16),
			NowMillis: time.Now().UnixMilli(),
		}, uint64(i+1))
		if err, ok := res.(error); ok {
			b.Fatal(err)
		}
	}
	var after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&after)
	heap := float64(after.HeapAlloc-before.HeapAlloc) / (1 << 20)

	dir := b.TempDir()
	store, err := raft.NewFileSnapshotStoreWithLogger(dir, 1, hclog.NewNullLogger())
	if err != nil {
		b.Fatal(err)
	}
	var persist, restore time.Duration
	var size int64
	b.ResetTimer()
	for range b.N {
		start := time.Now()
		snap, err := f.Snapshot()
		if err != nil {
			b.Fatal(err)
		}
		sink, err := store.Create(raft.SnapshotVersionMax, leases, 1, raft.Configuration{}, 1, nil)
		if err != nil {
			b.Fatal(err)
		}
		if err := snap.Persist(sink); err != nil {
			b.Fatal(err)
		}
		snap.Release()
		persist += time.Since(start)

		meta, rc, err := store.Open(sink.ID())
		if err != nil {
			b.Fatal(err)
		}
		size = meta.Size
		start = time.Now()
		fresh := fsm.New(logger)
		if err := fresh.Restore(rc); err != nil {
			b.Fatal(err)
		}
		restore += time.Since(start)
		if n := len(fresh.Locks()); n != leases {
			b.Fatalf("restored %d locks, want %d", n, leases)
		}
	}
	b.ReportMetric(heap, "state-heap-MB")
	b.ReportMetric(float64(size)/(1<<20), "snapshot-MB")
	b.ReportMetric(float64(persist.Milliseconds())/float64(b.N), "persist-ms")
	b.ReportMetric(float64(restore.Milliseconds())/float64(b.N), "restore-ms")
	b.ReportMetric(0, "ns/op")
}
