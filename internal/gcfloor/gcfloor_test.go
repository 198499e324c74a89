package gcfloor

import (
	"runtime"
	"testing"
	"time"
)

func TestPercentFor(t *testing.T) {
	for _, c := range []struct {
		live, floor uint64
		want        int
	}{
		{0, 64 << 20, maxPercent},
		{1 << 10, 64 << 20, maxPercent}, // a nearly empty heap: capped
		{8 << 20, 64 << 20, 700},        // next GC at 8 MiB × 8 = 64 MiB
		{32 << 20, 64 << 20, 100},       // floor reached at 2 × live: default
		{200 << 20, 64 << 20, 100},      // large heaps collect as by default
		{256 << 20, 64 << 20, 100},      // up to MaxHeadroom
		{512 << 20, 64 << 20, 50},       // then the headroom stays at 256 MiB
		{4 << 30, 64 << 20, MinPercent}, // down to MinPercent
		{16 << 20, 64 << 20, 300},
	} {
		if got := PercentFor(c.live, c.floor); got != c.want {
			t.Errorf("PercentFor(%d, %d) = %d, want %d", c.live, c.floor, got, c.want)
		}
	}
}

// TestStartTunesEveryCycle checks the real runtime: after Start the GOGC in
// force follows the live heap from one collection to the next, and Stop
// restores the default.
func TestStartTunesEveryCycle(t *testing.T) {
	t.Setenv("GOGC", "")
	if !Start(DefaultFloor) {
		t.Fatal("Start refused with GOGC unset")
	}
	t.Cleanup(Stop)
	small := Percent()
	if small <= 100 {
		t.Fatalf("with a small live heap GOGC = %d, want above 100", small)
	}

	// Hold 48 MiB live: the next collections must bring GOGC down to 100.
	held := make([][]byte, 48)
	for i := range held {
		held[i] = make([]byte, 1<<20)
	}
	waitPercent(t, func(p int) bool { return p == 100 })
	runtime.KeepAlive(held)
	held = nil

	// Once it is garbage, GOGC rises again.
	waitPercent(t, func(p int) bool { return p > 100 })

	Stop()
	if got := Percent(); got != 100 {
		t.Fatalf("after Stop GOGC = %d, want 100", got)
	}
}

func waitPercent(t *testing.T, ok func(int) bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !ok(Percent()) {
		if time.Now().After(deadline) {
			t.Fatalf("GOGC stuck at %d", Percent())
		}
		runtime.GC()
		time.Sleep(time.Millisecond) // let the cleanup goroutine run; the loop polls a state
	}
}

func TestExplicitGOGCWins(t *testing.T) {
	t.Setenv("GOGC", "50")
	if Start(DefaultFloor) {
		Stop()
		t.Fatal("Start ran although GOGC is set")
	}
}
