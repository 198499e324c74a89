package chaos

import (
	"context"
	"fmt"
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
// beyond soakBounds; an incarnation whose samples span less than
// soakMinSpan is too short to tell growth from noise and is not judged.
// The short runs of `go test` therefore judge nothing; a soak judges its
// witness (see Config.Witness), which lives the whole run, and any other
// incarnation that lived long enough.
const (
	soakSettle  = time.Minute
	soakMinSpan = 2 * time.Minute
)

// soakBound is how far one measure may grow over a baseline b: to
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
}

var soakBounds = []soakBound{
	// The GC does not run until the heap reaches its floor (64 MiB by
	// default, --gc-heap-floor-mb), so RSS may rise by that much in a
	// process that leaks nothing.
	{"rss", 1.5, 64 << 20, "MiB", func(u Usage) float64 { return u.RSS }},
	// The leader holds every client's connections and a follower few, and
	// a node may change role between two samples: about 6 connections per
	// client, and as many goroutines.
	{"open fds", 2, 64, "", func(u Usage) float64 { return u.FDs }},
	{"goroutines", 2, 128, "", func(u Usage) float64 { return u.Goroutines }},
}

// SoakReport is what the samples say.
type SoakReport struct {
	Samples []Usage
	// Judged names the incarnations whose growth was judged.
	Judged []string
	// Flags lists growth beyond the bounds: each fails the run.
	Flags []string
}

// judgeSoak judges every incarnation in samples (in the order taken).
func judgeSoak(samples []Usage) SoakReport {
	r := SoakReport{Samples: samples}
	type incarnation struct {
		node      string
		started   float64
		base, end *Usage
	}
	var order []*incarnation
	byKey := map[string]*incarnation{}
	for i := range samples {
		u := &samples[i]
		key := fmt.Sprintf("%s@%.2f", u.Node, u.Started)
		inc := byKey[key]
		if inc == nil {
			inc = &incarnation{node: u.Node, started: u.Started}
			byKey[key] = inc
			order = append(order, inc)
		}
		if inc.base == nil && u.Uptime >= soakSettle {
			inc.base = u
		}
		inc.end = u
	}
	for _, inc := range order {
		if inc.base == nil || inc.end.At-inc.base.At < soakMinSpan {
			continue
		}
		span := (inc.end.At - inc.base.At).Round(time.Second)
		r.Judged = append(r.Judged, fmt.Sprintf("%s over %v", inc.node, span))
		for _, b := range soakBounds {
			base, end := b.of(*inc.base), b.of(*inc.end)
			if limit := b.factor*base + b.slack; end > limit {
				r.Flags = append(r.Flags, fmt.Sprintf("%s: %s grew from %s to %s in %v (bound %s: %g×baseline + %s)",
					inc.node, b.name, b.format(base), b.format(end), span, b.format(limit), b.factor, b.format(b.slack)))
			}
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
		fmt.Fprintf(&b, "resource growth: not judged (no process sampled for %v after its first %v)\n", soakMinSpan, soakSettle)
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
