package bench

import (
	"fmt"
	"log/slog"
	"os"
	"runtime"
	"runtime/pprof"
	"syscall"
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
// node, a restarted node's time to ready) is scripts/bench-scale.sh and
// scripts/bench-hold.sh.
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
	var persist, restore, persistCPU, restoreCPU time.Duration
	var size int64
	b.ResetTimer()
	for range b.N {
		start, startCPU := time.Now(), cpuTime()
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
		persist, persistCPU = persist+time.Since(start), persistCPU+cpuTime()-startCPU

		meta, rc, err := store.Open(sink.ID())
		if err != nil {
			b.Fatal(err)
		}
		size = meta.Size
		start, startCPU = time.Now(), cpuTime()
		fresh := fsm.New(logger)
		if err := fresh.Restore(rc); err != nil {
			b.Fatal(err)
		}
		restore, restoreCPU = restore+time.Since(start), restoreCPU+cpuTime()-startCPU
		if n, _ := fresh.LockCount(""); n != leases {
			b.Fatalf("restored %d locks, want %d", n, leases)
		}
	}
	b.ReportMetric(heap/(1<<20), "state-heap-MB")
	b.ReportMetric(heap/float64(leases), "heap-B/lease")
	b.ReportMetric(float64(size)/(1<<20), "snapshot-MB")
	b.ReportMetric(float64(persist.Milliseconds())/float64(b.N), "persist-ms")
	b.ReportMetric(float64(restore.Milliseconds())/float64(b.N), "restore-ms")
	// CPU time (this process's, the collector's included) moves less than
	// wall time on a shared machine.
	b.ReportMetric(float64(persistCPU.Milliseconds())/float64(b.N), "persist-cpu-ms")
	b.ReportMetric(float64(restoreCPU.Milliseconds())/float64(b.N), "restore-cpu-ms")
	b.ReportMetric(0, "ns/op")
}

// cpuTime is the CPU time this process has used, user and system.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
