package locktable

import (
	"math/rand/v2"
	"strconv"
	"testing"

	"github.com/fencer-io/fencer/fsm/entry"
)

// The index answers as a map does through adds, replacements and removes
// that grow it and empty runs of it (fails with remove emptying the place
// without moving the run back: names past the hole are no longer found).
func TestIndexAgreesWithMap(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	x := newIndex(0)
	want := map[string]*Entry{}
	for i := range 200000 {
		name := strconv.Itoa(r.IntN(5000))
		switch r.IntN(3) {
		case 0, 1:
			e := NewEntry(&entry.Lock{Name: name, Token: uint64(i)})
			x.put(e)
			want[name] = e
		case 2:
			x.remove(name)
			delete(want, name)
		}
		if x.n != len(want) {
			t.Fatalf("step %d: %d entries, want %d", i, x.n, len(want))
		}
		if i%1000 == 0 {
			for n, e := range want {
				if got, ok := x.get(n); !ok || got != e {
					t.Fatalf("step %d: %q is %v, %v", i, n, got, ok)
				}
			}
		}
	}
	seen := 0
	for _, e := range x.entries {
		if e != nil {
			seen++
			if want[e.Name()] != e {
				t.Fatalf("%q: a stale entry", e.Name())
			}
		}
	}
	if seen != len(want) {
		t.Fatalf("%d entries in the table, want %d", seen, len(want))
	}
	if _, ok := x.get("absent"); ok {
		t.Fatal("found an absent name")
	}
}
