package events

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/fencer-io/fencer/fsm/event"
)

// The ring holds what a plain slice appended at its end and cut at its
// head would, through growth, wrapping, dropping and shrinking.
func TestRingMatchesASlice(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var r ring
	var model []event.Event
	index := uint64(0)
	grew, shrank := false, false
	for step := range 20_000 {
		// Bursts of entries with up to 3 events each, then long drops, so
		// that the ring grows past minRing and later shrinks.
		burst := step%5000 < 2500
		index++
		var entry []event.Event
		for k := range rng.IntN(4) {
			entry = append(entry, event.Event{Index: index, Lock: string(rune('a' + k))})
		}
		if burst || rng.IntN(4) == 0 {
			before := len(r.buf)
			r.push(entry)
			model = append(model, entry...)
			grew = grew || len(r.buf) > before && before > 0
		}
		keep := uint64(2000)
		if !burst {
			keep = 50
		}
		if index > keep {
			floor := index - keep
			before := len(r.buf)
			r.dropThrough(floor, func(*event.Event) {})
			for len(model) > 0 && model[0].Index <= floor {
				model = model[1:]
			}
			shrank = shrank || len(r.buf) < before
		}
		if r.len() != len(model) {
			t.Fatalf("step %d: %d events, want %d", step, r.len(), len(model))
		}
		if step%97 == 0 {
			from := index - uint64(rng.IntN(300))
			var want []event.Event
			for _, e := range model {
				if e.Index > from {
					want = append(want, e)
				}
			}
			var got []event.Event
			for i := r.search(from); i < r.len(); i++ {
				got = append(got, *r.at(i))
			}
			if !slices.Equal(got, want) {
				t.Fatalf("step %d: since(%d) = %d events, want %d", step, from, len(got), len(want))
			}
		}
	}
	if !grew || !shrank {
		t.Fatalf("grew %v, shrank %v: the test did not exercise both", grew, shrank)
	}
}

// BenchmarkApplied is the history's cost per applied entry of one event,
// at the default size (100,000 entries kept), with no watcher.
//
//	go test -run '^$' -bench Applied -benchmem ./coord/events/
func BenchmarkApplied(b *testing.B) {
	h := New(Config{})
	entry := []event.Event{{Type: "acquired", Lock: "bench-u-0", Holder: "bench", Token: 1}}
	index := uint64(0)
	for range 2 * DefaultHistory {
		index++
		entry[0].Index = index
		h.Applied(index, entry)
	}
	b.ReportAllocs()
	for b.Loop() {
		index++
		entry[0].Index = index
		h.Applied(index, entry)
	}
}
