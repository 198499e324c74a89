package bench

import (
	"fmt"
	"log/slog"
	"os"
	"runtime"
	"runtime/pprof"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"

	"github.com/fencer-io/fencer/fsm"
	"github.com/fencer-io/fencer/fsm/entry"
)

// BenchmarkSnapshot measures the state machine at scale, 10,000, 100,000
// and 1,000,000 held leases (each with its remembered request id, as a real
// acquire leaves): the heap the state takes, then a raft snapshot of it
// written to a file snapshot store, and a restore into a fresh FSM, as a
// restarted or lagging node does. Metrics: heap of the state (and per
// lease), snapshot bytes, persist and restore time. With
// FENCER_HEAP_PROFILE=DIR it writes DIR/heap-LEASES.pprof, a heap profile
// of the state (every allocation sampled). The cluster-level part (RSS per
// node, a restarted node's time to ready) is scripts/bench-scale.sh.
//
//	go test -run '^$' -bench Snapshot -benchtime 1x ./internal/bench/
//	go test -run '^$' -bench 'Snapshot/leases=1000000$' -benchtime 1x ./internal/bench/
func BenchmarkSnapshot(b *testing.B) {
	for _, n := range []int{10_000, 100_000, 1_000_000} {
		b.Run(fmt.Sprintf("leases=%d", n), func(b *testing.B) { benchmarkSnapshot(b, n) })
	}
}

func benchmarkSnapshot(b *testing.B, leases int) {
	logger := slog.New(slog.DiscardHandler)
	profile := os.Getenv("FENCER_HEAP_PROFILE")
	if profile != "" {
		defer func(rate int) { runtime.MemProfileRate = rate }(runtime.MemProfileRate)
		runtime.MemProfileRate = 1
	}
	var before runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	f := fsm.New(logger)
	for i := range leases {
		res := f.ApplyCommand(&entry.Acquire{
			Lock:      fmt.Sprintf("scale-%07d", i),
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
	heap := float64(after.HeapAlloc - before.HeapAlloc)
	if profile != "" {
		pf, err := os.Create(fmt.Sprintf("%s/heap-%d.pprof", profile, leases))
		if err != nil {
			b.Fatal(err)
		}
		if err := pprof.Lookup("heap").WriteTo(pf, 0); err != nil {
			b.Fatal(err)
		}
		pf.Close()
	}

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
		sink, err := store.Create(raft.SnapshotVersionMax, uint64(leases), 1, raft.Configuration{}, 1, nil)
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
		if n, _ := fresh.LockCount(""); n != leases {
			b.Fatalf("restored %d locks, want %d", n, leases)
		}
	}
	b.ReportMetric(heap/(1<<20), "state-heap-MB")
	b.ReportMetric(heap/float64(leases), "heap-B/lease")
	b.ReportMetric(float64(size)/(1<<20), "snapshot-MB")
	b.ReportMetric(float64(persist.Milliseconds())/float64(b.N), "persist-ms")
	b.ReportMetric(float64(restore.Milliseconds())/float64(b.N), "restore-ms")
	b.ReportMetric(0, "ns/op")
}
