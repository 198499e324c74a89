package nemesis

import (
	"slices"
	"testing"
)

func activeOf(name string, disturbed int) *active {
	return &active{name: name, kind: kinds[name], disturbed: disturbed}
}

// Stacking never disturbs more than a minority: with 3 members a second
// fault joins a disturbing one only if it disturbs nobody; with 5, two
// members may be disturbed, not three; kill-all is never stacked, and two
// faults never share a lever but the processes'.
func TestStackingStaysWithinAMinority(t *testing.T) {
	three := stackable(AllFaults, []*active{activeOf(FaultKillLeader, 1)}, 3)
	for _, name := range three {
		if kinds[name].disturbs > 0 {
			t.Errorf("3 members, a leader killed: %s (disturbs %d) may stack", name, kinds[name].disturbs)
		}
	}
	if !slices.Contains(three, FaultHTTPCut) || !slices.Contains(three, FaultPauseClient) {
		t.Errorf("3 members, a leader killed: %v, want the faults that disturb nobody", three)
	}

	five := stackable(AllFaults, []*active{activeOf(FaultSplit, 1)}, 5)
	for _, want := range []string{FaultKillNode, FaultPauseLeader, FaultMembership, FaultWipedRefused} {
		if !slices.Contains(five, want) {
			t.Errorf("5 members, one split off: %s may not stack, want it to", want)
		}
	}
	for _, name := range five {
		if kinds[name].lever == leverNetwork || kinds[name].lever == leverEverything {
			t.Errorf("5 members, one split off: %s stacks on a busy lever", name)
		}
	}
	for _, name := range stackable(AllFaults, []*active{activeOf(FaultSplit, 2)}, 5) {
		if kinds[name].disturbs > 0 {
			t.Errorf("5 members, two split off: %s (disturbs %d) may stack", name, kinds[name].disturbs)
		}
	}

	// Whatever is active, what may join it keeps a majority undisturbed.
	for members := 3; members <= 6; members++ {
		for _, first := range AllFaults {
			k := kinds[first]
			if k.lever == leverEverything {
				continue
			}
			a := activeOf(first, k.disturbs)
			for _, second := range stackable(AllFaults, []*active{a}, members) {
				if sum := k.disturbs + kinds[second].disturbs; 2*sum >= members {
					t.Errorf("%d members: %s+%s disturb %d", members, first, second, sum)
				}
			}
		}
	}
}
