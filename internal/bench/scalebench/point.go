package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"
)

// point is one JSON line of a run: a point of the curve ("hold"), the
// renewals after the last one ("renew"), or a restarted leader's time to
// ready ("restart", written by scripts/bench-scale.sh). MB are MiB.
type point struct {
	Mode     string `json:"mode"`
	Kind     string `json:"point"`
	Time     string `json:"time"`
	Load1    string `json:"load1"` // the machine's load average as it was measured
	Locks    int    `json:"locks"`
	Sessions int    `json:"sessions,omitempty"`
	Clients  int    `json:"clients,omitempty"`

	AcquirePerSec   float64       `json:"acquire_per_sec,omitempty"`
	AcquireErrors   int64         `json:"acquire_errors,omitempty"`
	SnapshotWaitSec float64       `json:"snapshot_wait_s,omitempty"`
	Snapshotted     *bool         `json:"snapshotted,omitempty"`
	Nodes           []nodeFigures `json:"nodes,omitempty"`

	Seconds            float64 `json:"seconds,omitempty"`
	Renewals           int64   `json:"renewals,omitempty"`
	RenewErrors        int64   `json:"renew_errors,omitempty"`
	RenewPerSec        float64 `json:"renewals_per_sec,omitempty"`
	P50Ms              float64 `json:"p50_ms,omitempty"`
	P99Ms              float64 `json:"p99_ms,omitempty"`
	Leader             string  `json:"leader,omitempty"`
	LeaderCPUPer10k    float64 `json:"leader_cpu_s_per_10k,omitempty"`
	FollowersCPUPer10k float64 `json:"followers_cpu_s_per_10k,omitempty"`
	ClientCPUPer10k    float64 `json:"client_cpu_s_per_10k,omitempty"`
	LeaderCores        float64 `json:"leader_cores,omitempty"`
	// ShortestTTLSec is the TTL at which what is held (every lock's lease,
	// or every session) renewed at a third of it takes the rate measured.
	ShortestTTLSec float64 `json:"shortest_ttl_s,omitempty"`

	Node     string  `json:"node,omitempty"`
	ReadySec float64 `json:"ready_s,omitempty"`
	RSSMB    float64 `json:"rss_mb,omitempty"`

	FirstError string `json:"first_error,omitempty"`
}

// nodeFigures is one member at a point. Per lock is the growth since the
// empty cluster, divided by the locks held.
type nodeFigures struct {
	ID            string  `json:"id"`
	Leader        bool    `json:"leader"`
	RSSMB         float64 `json:"rss_mb"`
	HeapMB        float64 `json:"heap_live_mb"`
	SnapshotIndex uint64  `json:"snapshot_index"`
	LocksHeld     int64   `json:"locks_held"`
	RSSPerLock    float64 `json:"rss_bytes_per_lock,omitempty"`
	HeapPerLock   float64 `json:"heap_bytes_per_lock,omitempty"`
}

func (p *point) setNodes(nodes, base []nodeFigures) {
	for i := range nodes {
		for _, b := range base {
			if b.ID == nodes[i].ID && p.Locks > 0 {
				nodes[i].RSSPerLock = round((nodes[i].RSSMB-b.RSSMB)*(1<<20)/float64(p.Locks), 0)
				nodes[i].HeapPerLock = round((nodes[i].HeapMB-b.HeapMB)*(1<<20)/float64(p.Locks), 0)
			}
		}
	}
	p.Nodes = nodes
}

// stamp records when and at what load a point was measured: the machine
// is shared, and the load says how far to trust a rate.
func (p *point) stamp() {
	p.Time = time.Now().UTC().Format(time.RFC3339)
	if b, err := os.ReadFile("/proc/loadavg"); err == nil {
		p.Load1, _, _ = strings.Cut(string(b), " ")
	}
}

// printTable prints the points in files (JSON lines) as a table per mode,
// with the targets of issue 27.
func printTable(w io.Writer, files []string) error {
	var points []point
	for _, name := range files {
		f, err := os.Open(name)
		if err != nil {
			return err
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			if strings.TrimSpace(sc.Text()) == "" {
				continue
			}
			var p point
			if err := json.Unmarshal(sc.Bytes(), &p); err != nil {
				f.Close()
				return fmt.Errorf("%s: %w", name, err)
			}
			points = append(points, p)
		}
		f.Close()
		if err := sc.Err(); err != nil {
			return err
		}
	}
	for _, mode := range []string{"leases", "sessions"} {
		printMode(w, mode, points)
	}
	return nil
}

func printMode(w io.Writer, mode string, points []point) {
	var hold []point
	var renew, restart *point
	for i, p := range points {
		if p.Mode != mode {
			continue
		}
		switch p.Kind {
		case "hold":
			hold = append(hold, p)
		case "renew":
			renew = &points[i]
		case "restart":
			restart = &points[i]
		}
	}
	if len(hold) == 0 {
		return
	}
	title := "each lock with a lease of its own"
	if mode == "sessions" {
		title = "locks under sessions"
	}
	fmt.Fprintf(w, "\n%s: %s (MB are MiB; per lock: growth since the empty cluster)\n", mode, title)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "locks\tsessions\tacquired/s\tsnapshots (wait)\tRSS leader\tRSS followers\theap leader\theap followers\tRSS B/lock leader\theap B/lock leader\tload\t")
	for _, p := range hold {
		snap := "no"
		if p.Snapshotted != nil && *p.Snapshotted {
			snap = "all"
		}
		var l nodeFigures
		var frss, fheap []string
		for _, n := range p.Nodes {
			if n.Leader {
				l = n
			} else {
				frss = append(frss, fmt.Sprintf("%.0f", n.RSSMB))
				fheap = append(fheap, fmt.Sprintf("%.0f", n.HeapMB))
			}
		}
		fmt.Fprintf(tw, "%d\t%d\t%.0f\t%s (%.0f s)\t%.0f MB\t%s MB\t%.0f MB\t%s MB\t%.0f\t%.0f\t%s\t\n",
			p.Locks, p.Sessions, p.AcquirePerSec, snap, p.SnapshotWaitSec, l.RSSMB, strings.Join(frss, " / "),
			l.HeapMB, strings.Join(fheap, " / "), l.RSSPerLock, l.HeapPerLock, p.Load1)
	}
	tw.Flush()
	last := hold[len(hold)-1]
	if renew != nil {
		what := fmt.Sprintf("%d leases", renew.Locks)
		if mode == "sessions" {
			what = fmt.Sprintf("%d sessions", renew.Sessions)
		}
		fmt.Fprintf(w, "renewals: %.0f/s sustained by leader %s (%d clients, %.0f s, %d errors; p50 %.1f ms, p99 %.1f ms); CPU per 10,000: leader %.2f s, followers %.2f s, client %.2f s; the leader used %.2f cores\n",
			renew.RenewPerSec, renew.Leader, renew.Clients, renew.Seconds, renew.RenewErrors, renew.P50Ms, renew.P99Ms,
			renew.LeaderCPUPer10k, renew.FollowersCPUPer10k, renew.ClientCPUPer10k, renew.LeaderCores)
		fmt.Fprintf(w, "  %s renewed at TTL/3 take that rate at a TTL of %.1f s\n", what, renew.ShortestTTLSec)
	}
	if restart != nil {
		fmt.Fprintf(w, "restarted leader %s: /readyz 200 after %.2f s, RSS %.0f MB\n", restart.Node, restart.ReadySec, restart.RSSMB)
	}
	if last.Locks < 1_000_000 {
		fmt.Fprintf(w, "targets (issue 27) are at 1,000,000 locks; this run stopped at %d\n", last.Locks)
		return
	}
	var maxRSS, leaderRSS float64
	for _, n := range last.Nodes {
		maxRSS = max(maxRSS, n.RSSMB)
		if n.Leader {
			leaderRSS = n.RSSMB
		}
	}
	if mode == "leases" {
		fmt.Fprintf(w, "target: every node <= 1 GB (1024 MB) after snapshots: %.0f MB, %s\n", maxRSS, met(maxRSS <= 1024))
	} else {
		fmt.Fprintf(w, "target: leader RSS <= 600 MB after snapshots: %.0f MB, %s\n", leaderRSS, met(leaderRSS <= 600))
		fmt.Fprintf(w, "target: 10,000 session renewals per TTL (not one per lock): %d sessions hold the %d locks, %s\n",
			last.Sessions, last.Locks, met(last.Sessions <= 10_000))
		if restart != nil {
			fmt.Fprintf(w, "target: restart to ready <= 5 s: %.2f s, %s\n", restart.ReadySec, met(restart.ReadySec <= 5))
		}
	}
}

func met(ok bool) string {
	if ok {
		return "met"
	}
	return "MISSED"
}
