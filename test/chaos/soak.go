package chaos

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/fencer-io/fencer/test/chaos/harness"
)

// Usage is one node process's resource use at one moment, read from its
// /metrics.
type Usage struct {
	Node string
	At   time.Duration // since the faults began
	// Started is the process's process_start_time_seconds, which tells one
	// incarnation of a node from the next.
	Started    float64
	Uptime     time.Duration
	RSS        float64 // process_resident_memory_bytes
	FDs        float64 // process_open_fds
	Goroutines float64 // go_goroutines
}

// Soak judging. A process is in its steady state once it has served the
// workload for soakSettle: its connection pools are full, every peer's
// replication runs, and the leader's lease timers are armed. From its
// first sample in that state (its baseline) to its last, it must not grow
// beyond soakBounds; a measure whose samples span less than soakMinSpan
// from its baseline is too short to tell growth from noise and is not
// judged. The short runs of `go test` therefore judge nothing; a soak
// judges its witness (see Config.Witness), which lives the whole run, and
// any other process that lived long enough.
const (
	soakSettle  = time.Minute
	soakMinSpan = 2 * time.Minute
)

// gcFloor is fencer's default heap floor (--gc-heap-floor-mb): the
// collector lets the heap grow to it before collecting, so a process's RSS
// climbs towards it for minutes at a light load, and reaching it is the
// start of the RSS steady state.
const gcFloor = 64 << 20

// soakBound is how far one measure may grow over its baseline b: to
// factor*b + slack. The slack absorbs what a healthy node's use swings by
// with its role and the moment; the factor, growth in proportion to what it
// already holds. A leak grows with operations or time, and a soak makes
// tens of thousands of operations: it leaves both far behind.
type soakBound struct {
	name   string
	factor float64
	slack  float64
	unit   string
	of     func(Usage) float64
	// steady reports whether a settled sample may be the baseline (nil:
	// any settled sample).
	steady func(Usage) bool
}

var soakBounds = []soakBound{
	// RSS is judged from the first sample at the GC floor: below it the
	// heap grows by design. Then it holds the floor, the runtime's own
	// memory, and bolt's mapped pages; half as much again plus 32 MiB is
	// more than a healthy node's swing from collection to collection.
	{"rss", 1.5, 32 << 20, "MiB", func(u Usage) float64 { return u.RSS }, func(u Usage) bool { return u.RSS >= gcFloor }},
	// The leader holds every client's connections and a follower few, and
	// a node may change role between two samples: a few connections per
	// client, and about as many goroutines.
	{"open fds", 2, 64, "", func(u Usage) float64 { return u.FDs }, nil},
	{"goroutines", 2, 128, "", func(u Usage) float64 { return u.Goroutines }, nil},
}

// SoakReport is what the samples say.
type SoakReport struct {
	Samples []Usage
	// Judged says, for each process judged, which measures were and over
	// how long.
	Judged []string
	// Flags lists growth beyond the bounds: each fails the run.
	Flags []string
}

// judgeSoak judges every node process in samples (in the order taken).
func judgeSoak(samples []Usage) SoakReport {
	r := SoakReport{Samples: samples}
	var order []string
	byProcess := map[string][]Usage{}
	for _, u := range samples {
		key := fmt.Sprintf("%s@%.2f", u.Node, u.Started)
		if byProcess[key] == nil {
			order = append(order, key)
		}
		byProcess[key] = append(byProcess[key], u)
	}
	for _, key := range order {
		mine := byProcess[key]
		end := mine[len(mine)-1]
		var judged []string
		for _, b := range soakBounds {
			i := slices.IndexFunc(mine, func(u Usage) bool { return u.Uptime >= soakSettle && (b.steady == nil || b.steady(u)) })
			if i < 0 || end.At-mine[i].At < soakMinSpan {
				continue
			}
			base, span := mine[i], (end.At - mine[i].At).Round(time.Second)
			judged = append(judged, fmt.Sprintf("%s over %v", b.name, span))
			if limit := b.factor*b.of(base) + b.slack; b.of(end) > limit {
				r.Flags = append(r.Flags, fmt.Sprintf("%s: %s grew from %s to %s in %v (bound %s: %g×baseline + %s)",
					end.Node, b.name, b.format(b.of(base)), b.format(b.of(end)), span, b.format(limit), b.factor, b.format(b.slack)))
			}
		}
		if len(judged) > 0 {
			r.Judged = append(r.Judged, end.Node+" ("+strings.Join(judged, ", ")+")")
		}
	}
	return r
}

func (b soakBound) format(v float64) string {
	if b.unit == "MiB" {
		return fmt.Sprintf("%.1f MiB", v/(1<<20))
	}
	return fmt.Sprintf("%.0f", v)
}

// String shows each node at the start of the steady state, half-way and
// at the end, then the verdict.
func (r SoakReport) String(d time.Duration) string {
	if len(r.Samples) == 0 {
		return "resource use: no samples\n"
	}
	var b strings.Builder
	b.WriteString("resource use (rss / open fds / goroutines; * = restarted since the previous column):\n")
	var nodes []string
	seen := map[string]bool{}
	for _, u := range r.Samples {
		if !seen[u.Node] {
			seen[u.Node] = true
			nodes = append(nodes, u.Node)
		}
	}
	for _, node := range nodes {
		var mine []Usage
		for _, u := range r.Samples {
			if u.Node == node {
				mine = append(mine, u)
			}
		}
		cols := []Usage{at(mine, min(soakSettle, d/4)), at(mine, d/2), mine[len(mine)-1]}
		fmt.Fprintf(&b, "  %-4s", node)
		for i, u := range cols {
			mark := " "
			if i > 0 && u.Started != cols[i-1].Started {
				mark = "*"
			}
			fmt.Fprintf(&b, " | %s%-6s %6.1f MiB %4.0f %5.0f", mark, u.At.Round(time.Second), u.RSS/(1<<20), u.FDs, u.Goroutines)
		}
		b.WriteString("\n")
	}
	switch {
	case len(r.Flags) > 0:
		fmt.Fprintf(&b, "resource growth beyond bounds: %d\n", len(r.Flags))
		for _, f := range r.Flags {
			fmt.Fprintf(&b, "  - %s\n", f)
		}
	case len(r.Judged) == 0:
		fmt.Fprintf(&b, "resource growth: not judged (no process sampled for %v after its first %v; RSS from the %d MiB GC floor on)\n", soakMinSpan, soakSettle, gcFloor>>20)
	default:
		fmt.Fprintf(&b, "resource growth: within bounds for %s\n", strings.Join(r.Judged, ", "))
	}
	return b.String()
}

// at returns the first of samples taken at or after t, else the last.
func at(samples []Usage, t time.Duration) Usage {
	for _, u := range samples {
		if u.At >= t {
			return u
		}
	}
	return samples[len(samples)-1]
}

// soakSampler samples every running member's use; the nemesis calls it
// whenever the cluster is healthy again, so no member is paused or cut off.
type soakSampler struct {
	begin   time.Time
	samples []Usage
	logf    func(string, ...any)
}

var usageMetrics = []string{"process_start_time_seconds", "process_resident_memory_bytes", "process_open_fds", "go_goroutines"}

func (s *soakSampler) sample(ctx context.Context, cl *harness.Cluster) {
	for _, m := range cl.Members() {
		if !m.Running() {
			continue
		}
		mctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		v, err := harness.Metrics(mctx, m.HTTPAddr, usageMetrics...)
		cancel()
		if err != nil || len(v) < len(usageMetrics) {
			s.logf("sampling %s: %v (have %d of %d metrics)", m.ID, err, len(v), len(usageMetrics))
			continue
		}
		now := time.Now()
		started := v["process_start_time_seconds"]
		s.samples = append(s.samples, Usage{
			Node: m.ID, At: now.Sub(s.begin), Started: started,
			Uptime: now.Sub(time.Unix(0, int64(started*1e9))),
			RSS:    v["process_resident_memory_bytes"], FDs: v["process_open_fds"], Goroutines: v["go_goroutines"],
		})
	}
}
