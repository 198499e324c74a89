package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/fencer-io/fencer/api/wire"
)

// cluster is the members being measured: their HTTP addresses and
// processes.
type cluster struct {
	nodes []member
	http  *http.Client
}

type member struct {
	id, addr string
	pid      int
}

// parseCluster reads -members id=HOST:PORT,… and -pids id=PID,….
func parseCluster(members, pids string) (*cluster, error) {
	pid := map[string]int{}
	for _, kv := range strings.Split(pids, ",") {
		id, p, ok := strings.Cut(kv, "=")
		n, err := strconv.Atoi(p)
		if !ok || err != nil || n < 1 {
			return nil, fmt.Errorf("-pids %q: want id=PID,…", pids)
		}
		pid[id] = n
	}
	c := &cluster{http: &http.Client{Timeout: 30 * time.Second}}
	for _, kv := range strings.Split(members, ",") {
		id, addr, ok := strings.Cut(kv, "=")
		if !ok || addr == "" || pid[id] == 0 {
			return nil, fmt.Errorf("-members %q: want id=HOST:PORT,… with a pid for each id", members)
		}
		c.nodes = append(c.nodes, member{id, addr, pid[id]})
	}
	return c, nil
}

func (c *cluster) endpoints() []string {
	var e []string
	for _, m := range c.nodes {
		e = append(e, m.addr)
	}
	return e
}

// leader is the member the first one that answers names as leader.
func (c *cluster) leader(ctx context.Context) (member, error) {
	var err error
	for _, m := range c.nodes {
		var st wire.ClusterStatus
		if err = c.getJSON(ctx, m, "/v1/cluster", &st); err != nil {
			continue
		}
		for _, l := range c.nodes {
			if l.id == st.Leader {
				return l, nil
			}
		}
		err = fmt.Errorf("%s names leader %q, not one of the members", m.id, st.Leader)
	}
	return member{}, fmt.Errorf("finding the leader: %w", err)
}

// awaitSnapshots waits, at most wait, until every member's last raft
// snapshot is within threshold entries of the leader's applied index:
// raft takes no snapshot of fewer new entries than that, so this is as
// close as one comes once the load has stopped (and some snapshot is
// needed: below the threshold raft takes none). It returns how long it
// waited and whether every member got there.
func (c *cluster) awaitSnapshots(ctx context.Context, threshold uint64, wait time.Duration) (float64, bool, error) {
	start := time.Now()
	l, err := c.leader(ctx)
	if err != nil {
		return 0, false, err
	}
	var st wire.ClusterStatus
	if err := c.getJSON(ctx, l, "/v1/cluster", &st); err != nil {
		return 0, false, err
	}
	target := uint64(0)
	if st.AppliedIndex > threshold {
		target = st.AppliedIndex - threshold
	}
	deadline := time.Now().Add(wait)
	for {
		done := 0
		for _, m := range c.nodes {
			v, err := c.metrics(ctx, m, "fencer_raft_last_snapshot_index")
			if idx := uint64(v["fencer_raft_last_snapshot_index"]); err == nil && idx > 0 && idx >= target {
				done++
			}
		}
		if done == len(c.nodes) {
			return round(time.Since(start).Seconds(), 1), true, nil
		}
		if time.Now().After(deadline) {
			return round(time.Since(start).Seconds(), 1), false, nil
		}
		select {
		case <-ctx.Done():
			return 0, false, context.Cause(ctx)
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// measure reads every member's figures: VmRSS first, as the process holds
// it, then the live heap right after a collection that the heap profile
// endpoint forces (gc=1; the members run with --pprof): without it the
// heap in use includes whatever garbage the collector has not reached.
// The leader's profile is kept in heapFile, when given.
func (c *cluster) measure(ctx context.Context, heapFile string) ([]nodeFigures, error) {
	l, err := c.leader(ctx)
	if err != nil {
		return nil, err
	}
	var out []nodeFigures
	for _, m := range c.nodes {
		rss, err := vmRSS(m.pid)
		if err != nil {
			return nil, err
		}
		var profile strings.Builder
		if err := c.get(ctx, m, "/debug/pprof/heap?gc=1", &profile); err != nil {
			return nil, fmt.Errorf("%s: forcing a collection (is --pprof on?): %w", m.id, err)
		}
		if heapFile != "" && m.id == l.id {
			if err := os.WriteFile(heapFile, []byte(profile.String()), 0o644); err != nil {
				return nil, err
			}
		}
		v, err := c.metrics(ctx, m, "go_memstats_heap_alloc_bytes", "fencer_raft_last_snapshot_index", "fencer_locks_held")
		if err != nil {
			return nil, err
		}
		out = append(out, nodeFigures{ID: m.id, Leader: m.id == l.id, RSSMB: mb(rss), HeapMB: mb(int64(v["go_memstats_heap_alloc_bytes"])),
			SnapshotIndex: uint64(v["fencer_raft_last_snapshot_index"]), LocksHeld: int64(v["fencer_locks_held"])})
	}
	return out, nil
}

// cpu is every member's CPU time so far, user and system, in seconds.
func (c *cluster) cpu() (map[string]float64, error) {
	out := map[string]float64{}
	for _, m := range c.nodes {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", m.pid))
		if err != nil {
			return nil, err
		}
		// The command name (field 2) may hold spaces: count from its end.
		f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
		if len(f) < 13 {
			return nil, fmt.Errorf("/proc/%d/stat: %d fields", m.pid, len(f))
		}
		utime, _ := strconv.ParseFloat(f[11], 64)
		stime, _ := strconv.ParseFloat(f[12], 64)
		// In clock ticks of USER_HZ, which Linux fixes at 100 on every
		// architecture Go supports.
		out[m.id] = (utime + stime) / 100
	}
	return out, nil
}

// selfCPU is this process's CPU time, user and system.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// vmRSS is a process's resident set in bytes, from /proc/PID/status.
func vmRSS(pid int) (int64, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return kb << 10, err
		}
	}
	return 0, fmt.Errorf("/proc/%d/status: no VmRSS", pid)
}

// metrics reads the named unlabelled samples of a member's /metrics.
func (c *cluster) metrics(ctx context.Context, m member, names ...string) (map[string]float64, error) {
	var b strings.Builder
	if err := c.get(ctx, m, "/metrics", &b); err != nil {
		return nil, err
	}
	out := map[string]float64{}
	for _, line := range strings.Split(b.String(), "\n") {
		name, value, ok := strings.Cut(line, " ")
		if !ok {
			continue
		}
		for _, n := range names {
			if name == n {
				v, err := strconv.ParseFloat(strings.TrimSpace(value), 64)
				if err != nil {
					return nil, fmt.Errorf("%s: metric %s: %w", m.id, n, err)
				}
				out[n] = v
			}
		}
	}
	for _, n := range names {
		if _, ok := out[n]; !ok {
			return nil, fmt.Errorf("%s: no metric %s", m.id, n)
		}
	}
	return out, nil
}

func (c *cluster) getJSON(ctx context.Context, m member, path string, out any) error {
	var b strings.Builder
	if err := c.get(ctx, m, path, &b); err != nil {
		return err
	}
	return json.Unmarshal([]byte(b.String()), out)
}

func (c *cluster) get(ctx context.Context, m member, path string, w io.Writer) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+m.addr+path, nil)
	if err != nil {
		return err
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s from %s: %s", path, m.id, resp.Status)
	}
	_, err = io.Copy(w, resp.Body)
	return err
}

func mb(b int64) float64 { return round(float64(b)/(1<<20), 1) }
