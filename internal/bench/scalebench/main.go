// Command scalebench measures what holding many locks costs a running
// fencer cluster: it acquires locks up to each point of a curve (each lock
// with a lease of its own, or -per-session of them under each session),
// waits at each point until every member has taken a raft snapshot that
// covers them, and reports every member's resident memory (VmRSS) and live
// Go heap; after the last point it renews what it holds as fast as the
// leader answers and reports the rate and the CPU it cost. It writes one
// JSON line per point (stdout) and progress on stderr;
// "scalebench table FILE" prints the lines of a run as a table.
// scripts/bench-scale.sh starts the cluster, runs it, and restarts the
// leader.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/fencer-io/fencer/internal/bench"
	"github.com/fencer-io/fencer/internal/bench/load"
	"github.com/fencer-io/fencer/internal/gcfloor"
)

type options struct {
	mode       string
	members    string
	pids       string
	points     string
	perSession int
	clients    int
	ttl        time.Duration
	renewFor   time.Duration
	threshold  uint64
	snapWait   time.Duration
	snapLast   bool
	heapFile   string
}

func main() {
	if len(os.Args) > 1 && os.Args[1] == "table" {
		if err := printTable(os.Stdout, os.Args[2:]); err != nil {
			fmt.Fprintln(os.Stderr, "scalebench table:", err)
			os.Exit(1)
		}
		return
	}
	var o options
	flag.StringVar(&o.mode, "mode", "leases", "leases (each lock its own lease) or sessions (-per-session locks under each session)")
	flag.StringVar(&o.members, "members", "", "id=HOST:PORT,… the members' HTTP addresses")
	flag.StringVar(&o.pids, "pids", "", "id=PID,… the members' processes (for VmRSS and CPU)")
	flag.StringVar(&o.points, "points", "10000,100000,300000,1000000", "locks held at each measured point, ascending")
	flag.IntVar(&o.perSession, "per-session", 100, "sessions mode: locks under each session")
	flag.IntVar(&o.clients, "clients", 256, "concurrent clients acquiring and renewing")
	flag.DurationVar(&o.ttl, "ttl", 2*time.Hour, "TTL of every lease and session (long: nothing expires during the run)")
	flag.DurationVar(&o.renewFor, "renew-for", 15*time.Second, "measured time of the renewals (0 skips them)")
	flag.Uint64Var(&o.threshold, "snapshot-threshold", 8192, "the members' --snapshot-threshold: a snapshot this close to the leader's applied index covers the point")
	flag.DurationVar(&o.snapWait, "snapshot-wait", 150*time.Second, "how long to wait at each point for every member's snapshot (raft checks every 30-60 s)")
	flag.BoolVar(&o.snapLast, "snapshot-last-only", false, "wait for the snapshots at the last point only (the others are measured at once: a short run)")
	flag.StringVar(&o.heapFile, "heap-profile", "", "keep the leader's heap profile at the last point in this file")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := o.run(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "scalebench:", err)
		os.Exit(1)
	}
}

func (o *options) validate() ([]int, error) {
	if o.mode != "leases" && o.mode != "sessions" {
		return nil, fmt.Errorf("-mode %q: want leases or sessions", o.mode)
	}
	if o.mode == "sessions" && o.perSession < 1 {
		return nil, fmt.Errorf("-per-session %d: want at least 1", o.perSession)
	}
	var points []int
	for _, p := range strings.Split(o.points, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(p))
		if err != nil || n < 1 || (len(points) > 0 && n <= points[len(points)-1]) {
			return nil, fmt.Errorf("-points %q: want ascending positive counts", o.points)
		}
		points = append(points, n)
	}
	return points, nil
}

func (o *options) run(ctx context.Context) error {
	points, err := o.validate()
	if err != nil {
		return err
	}
	c, err := parseCluster(o.members, o.pids)
	if err != nil {
		return err
	}
	// The client shares the CPUs with what it measures: keep its collector
	// quiet, as fencer bench does.
	gcfloor.Start(gcfloor.DefaultFloor)
	leader, err := c.leader(ctx)
	if err != nil {
		return err
	}
	f, err := bench.NewFencer(ctx, c.endpoints(), o.clients, o.ttl, 0, 10*time.Second, bench.Conn{})
	if err != nil {
		return err
	}
	defer f.Client.Close()
	s := &bench.Scale{Fencer: f, Leader: leader.addr}
	if o.mode == "sessions" {
		s.PerSession = o.perSession
	}
	base, err := c.measure(ctx, "")
	if err != nil {
		return err
	}
	logf("%s: %d members ready, leader %s; RSS before: %s", o.mode, len(c.nodes), leader.id, rssList(base))
	out := json.NewEncoder(os.Stdout)
	cfg := load.Config{Clients: o.clients, Duration: 24 * time.Hour, OpTimeout: 30 * time.Second}
	for _, n := range points {
		res, err := s.HoldTo(ctx, cfg, n)
		if err != nil {
			return err
		}
		logf("%s: %d locks held (%d sessions), %.0f acquired/s, %d errors %s", o.mode, s.Held(), s.Sessions(), res.OpsPerSec, res.Errors, res.FirstError)
		p := point{Mode: o.mode, Kind: "hold", Locks: s.Held(), Sessions: s.Sessions(), Clients: o.clients,
			AcquirePerSec: round(res.OpsPerSec, 0), AcquireErrors: res.Errors, FirstError: res.FirstError}
		var snapshotted bool
		if !o.snapLast || n == points[len(points)-1] {
			p.SnapshotWaitSec, snapshotted, err = c.awaitSnapshots(ctx, o.threshold, o.snapWait)
			if err != nil {
				return err
			}
		}
		p.Snapshotted = &snapshotted
		heap := ""
		if n == points[len(points)-1] {
			heap = o.heapFile
		}
		nodes, err := c.measure(ctx, heap)
		if err != nil {
			return err
		}
		p.setNodes(nodes, base)
		p.stamp()
		logf("%s: after snapshots (waited %.0f s, all: %v): RSS %s", o.mode, p.SnapshotWaitSec, snapshotted, rssList(nodes))
		if err := out.Encode(p); err != nil {
			return err
		}
	}
	if o.renewFor <= 0 || ctx.Err() != nil {
		return context.Cause(ctx)
	}
	r, err := o.renewals(ctx, c, s)
	if err != nil {
		return err
	}
	r.stamp()
	logf("%s: %.0f renewals/s, leader CPU %.2f s per 10,000", o.mode, r.RenewPerSec, r.LeaderCPUPer10k)
	return out.Encode(r)
}

// renewals renews what s holds for o.renewFor, after a warm-up, and
// measures the rate and each process's CPU over the window.
func (o *options) renewals(ctx context.Context, c *cluster, s *bench.Scale) (point, error) {
	cfg := load.Config{Clients: o.clients, Duration: 2 * time.Second, OpTimeout: 10 * time.Second}
	if _, err := load.Run(ctx, cfg, s.Renewals()); err != nil { // warm-up
		return point{}, err
	}
	leader, err := c.leader(ctx)
	if err != nil {
		return point{}, err
	}
	before, err := c.cpu()
	if err != nil {
		return point{}, err
	}
	self := selfCPU()
	cfg.Duration = o.renewFor
	res, err := load.Run(ctx, cfg, s.Renewals())
	if err != nil {
		return point{}, err
	}
	after, err := c.cpu()
	if err != nil {
		return point{}, err
	}
	renewed := s.Held() // what one renewal each keeps alive
	if s.PerSession > 0 {
		renewed = s.Sessions()
	}
	per10k := func(sec float64) float64 {
		if res.Ops == 0 {
			return 0
		}
		return round(sec*10_000/float64(res.Ops), 3)
	}
	p := point{Mode: o.mode, Kind: "renew", Locks: s.Held(), Sessions: s.Sessions(), Clients: o.clients,
		Seconds: round(res.Seconds, 1), Renewals: res.Ops, RenewErrors: res.Errors, FirstError: res.FirstError,
		RenewPerSec: round(res.OpsPerSec, 0), P50Ms: res.P50Ms, P99Ms: res.P99Ms,
		ClientCPUPer10k: per10k((selfCPU() - self).Seconds())}
	var followers float64
	for id, a := range after {
		if id == leader.id {
			p.LeaderCPUPer10k = per10k(a - before[id])
			p.LeaderCores = round((a-before[id])/res.Seconds, 2)
		} else {
			followers += a - before[id]
		}
	}
	p.FollowersCPUPer10k = per10k(followers)
	p.Leader = leader.id
	if res.OpsPerSec > 0 {
		// A client renews at a third of the TTL (api/client): renewed
		// leases need 3 × renewed / TTL renewals a second.
		p.ShortestTTLSec = round(3*float64(renewed)/res.OpsPerSec, 2)
	}
	return p, nil
}

func rssList(nodes []nodeFigures) string {
	var b strings.Builder
	for i, n := range nodes {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s %.0f MB", n.ID, n.RSSMB)
	}
	return b.String()
}

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "== %s "+format+"\n", append([]any{time.Now().UTC().Format("15:04:05")}, args...)...)
}

func round(v float64, digits int) float64 {
	p := 1.0
	for range digits {
		p *= 10
	}
	return float64(int64(v*p+0.5)) / p
}
