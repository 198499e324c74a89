// Package gcfloor keeps the Go garbage collector from running while the
// heap is small.
//
// A fencer node's live heap is a few megabytes until it holds many leases,
// while every request, Raft entry and bolt transaction allocates: at the
// default GOGC=100 the collector then runs hundreds of times a second and
// costs a tenth of the CPU of a busy 2-core machine (by profile). The Go
// runtime has a ceiling (GOMEMLIMIT) but no floor, so this package adds
// one: after each collection it sets GOGC so that the next one comes when
// the heap reaches about Floor bytes, and never below GOGC=100 while the
// live heap is under MaxHeadroom, so a live heap of 100,000 leases is
// collected exactly as by default. Above it the headroom stays at
// MaxHeadroom (GOGC below 100, never below MinPercent): a million leases
// are about 450 MB live on a leader, which the default would let grow to
// 900 MB of heap between collections, and a node's memory should stay
// proportional to what it holds. An explicit GOGC in the environment wins:
// then the package does nothing.
package gcfloor

import (
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
	"sync/atomic"
)

// DefaultFloor is the heap size below which fencer processes do not collect.
const DefaultFloor = 64 << 20

// MaxHeadroom is the most the heap may grow past the live heap between two
// collections once the live heap is that large: then GOGC falls below 100,
// to MinPercent at the lowest.
const MaxHeadroom = 256 << 20

// MinPercent is the lowest GOGC set: the collector's CPU grows as GOGC
// falls, and at 25 a collection comes after a quarter of the live heap is
// allocated anew.
const MinPercent = 25

// maxPercent bounds GOGC so that a nearly empty heap does not make the next
// collection wait for an absurd multiple of it.
const maxPercent = 2000

var (
	mu      sync.Mutex
	floor   atomic.Uint64 // 0: stopped
	percent atomic.Int64  // the GOGC last set; 0 before any
	gen     atomic.Uint64 // bumped by each Start from stopped, so one chain of cleanups runs
)

// Start keeps the heap floor at bytes until Stop, unless GOGC is set in the
// environment. It reports whether it started. Calling it again changes the
// floor.
func Start(bytes uint64) bool {
	if os.Getenv("GOGC") != "" || bytes == 0 {
		return false
	}
	mu.Lock()
	defer mu.Unlock()
	if floor.Swap(bytes) == 0 {
		tune()
		arm(gen.Add(1))
	}
	return true
}

// Stop returns the collector to GOGC=100 after the next collection at the
// latest.
func Stop() {
	mu.Lock()
	defer mu.Unlock()
	if floor.Swap(0) != 0 {
		debug.SetGCPercent(100)
		percent.Store(100)
	}
}

// Percent is the GOGC this package last set (0 if it never ran).
func Percent() int { return int(percent.Load()) }

// arm registers a cleanup on a fresh object that becomes unreachable at
// once, so it runs after the next collection; the cleanup re-tunes and
// re-arms, which makes tune run once per GC cycle. A chain whose
// generation is no longer current (Stop, then Start) ends.
func arm(g uint64) {
	sentinel := new([16]byte)
	runtime.AddCleanup(sentinel, func(g uint64) {
		mu.Lock()
		defer mu.Unlock()
		if floor.Load() == 0 || gen.Load() != g {
			return
		}
		tune()
		arm(g)
	}, g)
}

var liveSample = []metrics.Sample{{Name: "/gc/heap/live:bytes"}}

// tune sets GOGC from the live heap the last collection measured.
func tune() {
	f := floor.Load()
	if f == 0 {
		return
	}
	metrics.Read(liveSample)
	var live uint64
	if liveSample[0].Value.Kind() == metrics.KindUint64 {
		live = liveSample[0].Value.Uint64()
	}
	p := PercentFor(live, f)
	if int64(p) != percent.Load() {
		debug.SetGCPercent(p)
		percent.Store(int64(p))
	}
}

// PercentFor is the GOGC that puts the next collection at about floor bytes
// of heap when live bytes survived the last one: never above maxPercent,
// the default of 100 from a live heap of half the floor, and below it only
// when the live heap exceeds MaxHeadroom, to keep the headroom there.
func PercentFor(live, floor uint64) int {
	if live == 0 {
		return maxPercent
	}
	if live > MaxHeadroom {
		return int(max(MaxHeadroom*100/live, MinPercent))
	}
	if floor <= 2*live {
		return 100
	}
	return int(min(floor*100/live-100, maxPercent))
}
