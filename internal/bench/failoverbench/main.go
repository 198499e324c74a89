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
	"runtime/pprof"
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
	// checkReady refuses to stop the leader unless every member answers
	// /readyz as itself: a run with a member already down measures a
	// different failure (one survivor after the stop, no quorum).
	checkReady bool
	// Conditions to provoke, for looking into a failover that went wrong.
	// downFollower: at the event a follower is killed (SIGKILL), and the
	// leader is stopped that much later: the cluster is one member short,
	// as when a member failed to start. stall: the leader is frozen
	// (SIGSTOP) that long just before it is signalled, so that the
	// followers may have started an election as it is stopped.
	downFollower time.Duration
	stall        time.Duration
	outage       outage.Config
}

// report is a run's result with what was checked before the stop.
type report struct {
	outage.Result
	// ReadyAtStop is each member's /readyz just before the leader was
	// signalled: "ready", or why not.
	ReadyAtStop map[string]string `json:"ready_at_stop,omitempty"`
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
	flag.BoolVar(&o.checkReady, "check-ready", true, "stop the leader only if every member answers /readyz first (false: stop it anyway, recording what each answered)")
	flag.DurationVar(&o.downFollower, "down-follower", 0, "provoke: at -at, SIGKILL one follower, then stop the leader this much later (0: none; implies -check-ready=false; gaps are then measured from the follower's kill)")
	flag.DurationVar(&o.stall, "stall", 0, "provoke: SIGSTOP the leader this long, then SIGCONT, just before it is signalled (0: none)")
	flag.Parse()
	gcfloor.Start(gcfloor.DefaultFloor)
	dumpOnSignal()
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
	var ready map[string]string
	if o.downFollower > 0 {
		o.checkReady = false
	}
	cfg.Origin = p.timeline.At // the leader's stop, after any provocation
	cfg.Event = func(ctx context.Context) (string, error) {
		var provoked []string
		if o.downFollower > 0 {
			what, err := p.killFollower(ctx, pids)
			if err != nil {
				return "", err
			}
			provoked = append(provoked, fmt.Sprintf("%s %v before", what, o.downFollower))
			time.Sleep(o.downFollower) // the cluster runs one member short
		}
		var unready []string
		ready, unready = p.ready(ctx, o.checkReady)
		if len(unready) > 0 && o.checkReady {
			return "", fmt.Errorf("not stopping the leader: not every member is ready: %s", strings.Join(unready, "; "))
		}
		leader, err := p.leader(ctx)
		if err != nil {
			return "", err
		}
		pid, err := strconv.Atoi(pids[leader])
		if err != nil {
			return "", fmt.Errorf("no pid for leader %s", leader)
		}
		if o.stall > 0 {
			if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
				return "", err
			}
			time.Sleep(o.stall) // the provoked stall itself
			if err := syscall.Kill(pid, syscall.SIGCONT); err != nil {
				return "", err
			}
			provoked = append(provoked, fmt.Sprintf("leader frozen %v first", o.stall))
		}
		p.timeline.Start(time.Now())
		if err := syscall.Kill(pid, sig); err != nil {
			return "", err
		}
		go p.follow(context.WithoutCancel(ctx), leader, pid)
		what := fmt.Sprintf("stopped leader %s (pid %d) with SIG%s", leader, pid, o.signal)
		if len(provoked) > 0 {
			what += " (" + strings.Join(provoked, "; ") + ")"
		}
		return what, nil
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
		return enc.Encode(report{Result: res, ReadyAtStop: ready})
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

// ready asks every member's /readyz until each has answered ready once, for
// up to readyWait (once, without wait): each member's answer ("ready", or its last reason not to
// be), and the members that never were, with why. A follower under load
// answers 503 for a moment whenever it has not yet applied all it knows to
// be committed, so one answer is not enough to tell a member that is down
// (refused, or another process on its port) from one a few entries behind.
func (p *prober) ready(ctx context.Context, wait bool) (answers map[string]string, unready []string) {
	answers = map[string]string{}
	deadline := time.Now()
	if wait {
		deadline = deadline.Add(readyWait)
	}
	for _, id := range sortedKeys(p.members) {
		for {
			answers[id] = p.readyz(ctx, id)
			if answers[id] == "ready" || time.Now().After(deadline) || ctx.Err() != nil {
				break
			}
			time.Sleep(20 * time.Millisecond) // polling interval
		}
		if answers[id] != "ready" {
			unready = append(unready, id+": "+answers[id])
		}
	}
	return answers, unready
}

// readyWait bounds the readiness check before the stop.
const readyWait = 2 * time.Second

func (p *prober) readyz(ctx context.Context, id string) string {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+p.members[id]+"/readyz", nil)
	if err != nil {
		return err.Error()
	}
	resp, err := p.hc.Do(req)
	if err != nil {
		return err.Error()
	}
	defer resp.Body.Close()
	var h wire.Health
	if err := json.NewDecoder(resp.Body).Decode(&h); err != nil {
		return fmt.Sprintf("HTTP %d: %v", resp.StatusCode, err)
	}
	switch {
	case resp.StatusCode != http.StatusOK:
		return fmt.Sprintf("HTTP %d", resp.StatusCode)
	case h.Node != id:
		// Another process answers on the member's port.
		return fmt.Sprintf("answered by %q", h.Node)
	}
	return h.Status
}

// killFollower kills (SIGKILL) a member that answers and does not lead.
func (p *prober) killFollower(ctx context.Context, pids map[string]string) (string, error) {
	leader, err := p.leader(ctx)
	if err != nil {
		return "", err
	}
	for _, id := range sortedKeys(p.members) {
		if _, err := p.status(ctx, p.members[id]); id == leader || err != nil {
			continue
		}
		pid, err := strconv.Atoi(pids[id])
		if err != nil {
			return "", fmt.Errorf("no pid for follower %s", id)
		}
		return fmt.Sprintf("follower %s (pid %d) killed", id, pid), syscall.Kill(pid, syscall.SIGKILL)
	}
	return "", errors.New("no follower answers")
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

// dumpOnSignal writes every goroutine's stack to stderr on SIGUSR1, so that
// a run whose requests hang can be looked into from outside while it hangs.
func dumpOnSignal() {
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, syscall.SIGUSR1)
	go func() {
		for range ch {
			fmt.Fprintf(os.Stderr, "--- goroutines at %s\n", time.Now().Format("15:04:05.000"))
			_ = pprof.Lookup("goroutine").WriteTo(os.Stderr, 2)
		}
	}()
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
