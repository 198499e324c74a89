// Command failoverbench measures what stopping a fencer cluster's leader
// costs its clients: clients cycle locks through every member (package
// bench's Failover workload), the leader's process is sent a signal (TERM:
// a graceful stop, KILL: a crash) a few seconds in, and the result is the
// longest interval in which no cycle succeeded (package outage). It also
// records when the surviving members first report a candidate and a new
// leader, for the decomposition of a failover. scripts/bench-failover.sh
// runs it; scripts/etcdbench -workload failover is its etcd counterpart.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/fencer-io/fencer/api/wire"
	"github.com/fencer-io/fencer/internal/bench"
	"github.com/fencer-io/fencer/internal/bench/outage"
	"github.com/fencer-io/fencer/internal/gcfloor"
)

type options struct {
	members string
	pids    string
	signal  string
	output  string
	ttl     time.Duration
	verbose bool
	outage  outage.Config
}

func main() {
	var o options
	flag.StringVar(&o.members, "members", "", "id=HOST:PORT,… the members' HTTP addresses")
	flag.StringVar(&o.pids, "pids", "", "id=PID,… the members' processes")
	flag.StringVar(&o.signal, "signal", "TERM", "what stops the leader: TERM (graceful) or KILL (crash)")
	flag.StringVar(&o.output, "o", "text", "output: text or json")
	flag.DurationVar(&o.ttl, "ttl", 10*time.Second, "TTL of every grant")
	flag.IntVar(&o.outage.Clients, "clients", 16, "concurrent clients")
	flag.DurationVar(&o.outage.Duration, "duration", 10*time.Second, "the whole run")
	flag.DurationVar(&o.outage.Warmup, "warmup", time.Second, "time before measuring")
	flag.DurationVar(&o.outage.At, "at", 4*time.Second, "when the leader is stopped")
	flag.DurationVar(&o.outage.OpTimeout, "op-timeout", 10*time.Second, "time limit of one cycle")
	flag.BoolVar(&o.verbose, "v", false, "log every 503 a plain HTTP client waits out (stderr)")
	flag.Parse()
	gcfloor.Start(gcfloor.DefaultFloor)
	if err := run(o); err != nil {
		fmt.Fprintln(os.Stderr, "failoverbench:", err)
		os.Exit(1)
	}
}

// It is long because it is one measured failover run, each step used once.
func run(o options) error {
	members, err := parseMap(o.members)
	if err != nil {
		return fmt.Errorf("-members: %w", err)
	}
	pids, err := parseMap(o.pids)
	if err != nil {
		return fmt.Errorf("-pids: %w", err)
	}
	sig, mode, err := outage.StopSignal(o.signal)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	var addrs []string
	for _, id := range sortedKeys(members) {
		addrs = append(addrs, members[id])
	}
	w := bench.NewFailover(addrs, o.ttl)
	if o.verbose {
		w.Log = os.Stderr
	}
	p := &prober{members: members, hc: &http.Client{Timeout: 500 * time.Millisecond}}
	cfg := o.outage
	cfg.Group = w.Group
	cfg.Event = func(ctx context.Context) (string, error) {
		leader, err := p.leader(ctx)
		if err != nil {
			return "", err
		}
		pid, err := strconv.Atoi(pids[leader])
		if err != nil {
			return "", fmt.Errorf("no pid for leader %s", leader)
		}
		p.timeline.Start(time.Now())
		if err := syscall.Kill(pid, sig); err != nil {
			return "", err
		}
		go p.follow(context.WithoutCancel(ctx), leader, pid)
		return fmt.Sprintf("stopped leader %s (pid %d) with SIG%s", leader, pid, o.signal), nil
	}
	res, err := outage.Run(ctx, cfg, w.Client)
	if err != nil {
		return err
	}
	res.System, res.Mode = "fencer", mode
	res.Timeline = p.timeline.Marks()
	if o.output == "json" {
		enc := json.NewEncoder(os.Stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(res)
	}
	fmt.Println(res.Text())
	fmt.Println("timeline (ms after the signal):", res.Timeline)
	return nil
}

// prober watches the members' own views of the cluster.
type prober struct {
	members  map[string]string
	hc       *http.Client
	timeline outage.Timeline
}

func (p *prober) status(ctx context.Context, addr string) (wire.ClusterStatus, error) {
	var st wire.ClusterStatus
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/v1/cluster", nil)
	if err != nil {
		return st, err
	}
	resp, err := p.hc.Do(req)
	if err != nil {
		return st, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return st, fmt.Errorf("%s: HTTP %d", addr, resp.StatusCode)
	}
	return st, json.NewDecoder(resp.Body).Decode(&st)
}

// leader asks the members who leads.
func (p *prober) leader(ctx context.Context) (string, error) {
	for _, id := range sortedKeys(p.members) {
		st, err := p.status(ctx, p.members[id])
		if err == nil && st.Leader != "" {
			return st.Leader, nil
		}
	}
	return "", errors.New("no member knows a leader")
}

// follow records, after the old leader was signalled: when its process
// exited, when a surviving member first reported itself a candidate, when
// one first reported a new leader, and when every survivor did. It stops
// after 10 s.
func (p *prober) follow(ctx context.Context, old string, pid int) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	mark := p.timeline.Mark
	var wg sync.WaitGroup
	wg.Go(func() { p.timeline.FollowExit(ctx, pid) })
	var survivors []string
	for _, id := range sortedKeys(p.members) {
		if id != old {
			survivors = append(survivors, id)
		}
	}
	knows := map[string]bool{}
	for ctx.Err() == nil && len(knows) < len(survivors) {
		for _, id := range survivors {
			st, err := p.status(ctx, p.members[id])
			if err != nil {
				continue
			}
			if st.State == "Candidate" {
				mark("first_candidate")
			}
			if st.Leader != "" && st.Leader != old {
				mark("new_leader_known")
				knows[id] = true
			}
		}
		time.Sleep(2 * time.Millisecond) // sampling interval
	}
	if len(knows) == len(survivors) {
		mark("all_survivors_know_leader")
	}
	wg.Wait()
}

func parseMap(s string) (map[string]string, error) {
	out := map[string]string{}
	for _, part := range strings.Split(s, ",") {
		if part = strings.TrimSpace(part); part == "" {
			continue
		}
		k, v, ok := strings.Cut(part, "=")
		if !ok || k == "" || v == "" {
			return nil, fmt.Errorf("%q: want ID=VALUE", part)
		}
		out[k] = v
	}
	if len(out) == 0 {
		return nil, errors.New("empty")
	}
	return out, nil
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
