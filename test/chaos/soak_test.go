package chaos

import (
	"strings"
	"testing"
	"time"
)

// series is one incarnation's samples, one a minute from minute 1 to
// minute len(rss), started at minute 0.
func series(node string, started float64, rssMiB, fds, goroutines []float64) []Usage {
	var out []Usage
	for i := range rssMiB {
		at := time.Duration(i+1) * time.Minute
		out = append(out, Usage{Node: node, At: at, Started: started, Uptime: at,
			RSS: rssMiB[i] * (1 << 20), FDs: fds[i], Goroutines: goroutines[i]})
	}
	return out
}

func TestSoakFlagsGrowthBeyondBounds(t *testing.T) {
	steady := series("n1", 1, []float64{40, 80, 90, 85}, []float64{30, 40, 35, 33}, []float64{60, 90, 80, 75})
	r := judgeSoak(steady)
	if len(r.Flags) != 0 || len(r.Judged) != 1 || !strings.Contains(r.Judged[0], "rss over 2m0s") {
		t.Fatalf("a node that fills its GC floor and no more: judged %v, flagged %v; want rss judged from the floor, nothing flagged", r.Judged, r.Flags)
	}
	filling := series("n1", 1, []float64{30, 40, 50, 95}, []float64{30, 30, 30, 30}, []float64{60, 60, 60, 60})
	if r := judgeSoak(filling); len(r.Flags) != 0 || strings.Contains(r.Judged[0], "rss") {
		t.Fatalf("a node still filling its GC floor: judged %v, flagged %v; want rss not judged", r.Judged, r.Flags)
	}

	for _, c := range []struct {
		what    string
		samples []Usage
	}{
		{"rss", series("n2", 1, []float64{40, 80, 150, 200}, []float64{30, 30, 30, 30}, []float64{60, 60, 60, 60})},
		{"open fds", series("n2", 1, []float64{40, 40, 40, 40}, []float64{30, 100, 200, 400}, []float64{60, 60, 60, 60})},
		{"goroutines", series("n2", 1, []float64{40, 40, 40, 40}, []float64{30, 30, 30, 30}, []float64{60, 200, 600, 2000})},
	} {
		r := judgeSoak(c.samples)
		if len(r.Flags) != 1 || !strings.Contains(r.Flags[0], "n2: "+c.what+" grew") {
			t.Errorf("%s leak: flags %v, want one naming n2's %s", c.what, r.Flags, c.what)
		}
		if !strings.Contains(r.String(5*time.Minute), "beyond bounds") {
			t.Errorf("%s leak: the report does not say so:\n%s", c.what, r.String(5*time.Minute))
		}
	}
}

// A restart resets a process's use: its incarnations are judged apart, so
// a leaky one is caught however often its node restarts, and a fresh one is
// never compared with its predecessor.
func TestSoakJudgesIncarnationsApart(t *testing.T) {
	leaky := series("n3", 1, []float64{40, 40, 40, 40}, []float64{30, 30, 30, 30}, []float64{60, 300, 600, 900})
	fresh := series("n3", 500, []float64{10, 10}, []float64{10, 10}, []float64{20, 20})
	for i := range fresh {
		fresh[i].At += 4 * time.Minute
	}
	r := judgeSoak(append(leaky, fresh...))
	if len(r.Flags) != 1 || len(r.Judged) != 1 {
		t.Fatalf("judged %v, flagged %v; want only the first incarnation judged, and flagged", r.Judged, r.Flags)
	}

	// Growth across a restart is no growth; a short life is not judged.
	before := series("n4", 1, []float64{20, 20}, []float64{10, 10}, []float64{20, 20})
	after := series("n4", 200, []float64{90, 95}, []float64{60, 60}, []float64{150, 150})
	for i := range after {
		after[i].At += 2 * time.Minute
	}
	if r := judgeSoak(append(before, after...)); len(r.Flags) != 0 || len(r.Judged) != 0 {
		t.Fatalf("judged %v, flagged %v; want nothing judged", r.Judged, r.Flags)
	}
}
