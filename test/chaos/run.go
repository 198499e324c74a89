package chaos

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/fencer-io/fencer/api/client"
	"github.com/fencer-io/fencer/api/wire"
	"github.com/fencer-io/fencer/test/chaos/checker"
	"github.com/fencer-io/fencer/test/chaos/harness"
	"github.com/fencer-io/fencer/test/chaos/history"
	"github.com/fencer-io/fencer/test/chaos/nemesis"
	"github.com/fencer-io/fencer/test/chaos/netfault"
	"github.com/fencer-io/fencer/test/chaos/workload"
)

// Config describes one chaos run. Zero values mean the defaults.
type Config struct {
	Seed    uint64
	Nodes   int // initial members (default 3)
	Clients int // lock client processes (default Nodes+1)
	// SemClients take permits of one semaphore of limit SemLimit (default
	// 3 clients, limit 2); Campaigners campaign in one election and
	// observe it (default 2). Negative: none.
	SemClients  int
	SemLimit    int
	Campaigners int
	// SessionClients each hold all of sessionLocks and a permit of
	// sessionSemaphore (limit SemLimit) under one session (default 3;
	// negative: none).
	SessionClients int
	// RWClients take rwLocks shared or exclusive (default 3; negative:
	// none).
	RWClients int
	// DurableClients take durableLocks as rw clients do, their waits
	// durable (default 2; negative: none).
	DurableClients int
	Duration       time.Duration // of faults under load (default 1m)
	// Faults lists the faults to inject (default nemesis.AllFaults).
	Faults []string
	// PauseRestartsResource is the chance that a client pause also
	// restarts the resource just before the client resumes (default 0.5).
	PauseRestartsResource float64
	// StackChance is the chance that the nemesis stacks a second fault on
	// one that holds (default 0.3; negative: never).
	StackChance float64
	// Witness names an initial member that no fault kills, wipes or
	// removes, so that one process lives the whole run and a soak can
	// judge its growth. Empty: none.
	Witness string
	// Broken lists the resource's brokenfence modes: the negative control.
	Broken string
	// LogStore is the members' log store: bolt (default), wal, or mixed.
	LogStore string

	Bin        string   // fencer binary
	ClientBin  string   // binary that runs workload.Main when ConfigEnv is set
	ClientArgs []string // its arguments
	WorkDir    string   // data dirs
	Artifacts  string   // logs, and on failure the history and report
	// CheckTimeout bounds each linearizability search (default 1m).
	CheckTimeout time.Duration
	Logf         func(format string, args ...any)
	// Group starts every process; the caller may kill them all from its
	// own cleanup too. Nil means a group of the run's own.
	Group *harness.Group
}

func (c *Config) defaults() error {
	c.Nodes = cmp.Or(c.Nodes, 3)
	c.Clients = cmp.Or(c.Clients, c.Nodes+1)
	c.SemClients = cmp.Or(c.SemClients, 3)
	c.SemLimit = cmp.Or(c.SemLimit, 2)
	c.Campaigners = cmp.Or(c.Campaigners, 2)
	c.SessionClients = cmp.Or(c.SessionClients, 3)
	c.RWClients = cmp.Or(c.RWClients, 3)
	c.DurableClients = cmp.Or(c.DurableClients, 2)
	c.Duration = cmp.Or(c.Duration, time.Minute)
	if len(c.Faults) == 0 {
		c.Faults = nemesis.AllFaults
	}
	c.PauseRestartsResource = cmp.Or(c.PauseRestartsResource, 0.5)
	c.StackChance = cmp.Or(c.StackChance, 0.3)
	c.CheckTimeout = cmp.Or(c.CheckTimeout, time.Minute)
	if c.Logf == nil {
		c.Logf = func(string, ...any) {}
	}
	if err := nemesis.CheckFaults(c.Faults); err != nil {
		return err
	}
	if c.Witness != "" && !slices.Contains(initialIDs(c.Nodes), c.Witness) {
		return fmt.Errorf("witness %q is not an initial member (%v)", c.Witness, initialIDs(c.Nodes))
	}
	switch {
	case c.Bin == "" || c.ClientBin == "":
		return errors.New("chaos: Bin and ClientBin are required")
	case c.WorkDir == "" || c.Artifacts == "":
		return errors.New("chaos: WorkDir and Artifacts are required")
	}
	return nil
}

// Result is what a run found.
type Result struct {
	Config  Config
	History history.History
	Report  checker.Report
	// Faults counts the faults injected, by name, stacked ones included.
	Faults map[string]int
	// Stacked counts the stacked pairs, as "first+second".
	Stacked map[string]int
	// Incomplete counts the faults that could not be put in place or
	// healed as planned (no lock held to pause, no free leader).
	Incomplete map[string]int
	// Gated counts the connections to the nodes' advertised HTTP addresses
	// by the node or client that made them; "" counts those that could not
	// be attributed, and so went through unfaulted.
	Gated map[string]int64
	// HTTPStats sums the HTTP links' counters: what the cuts refused.
	HTTPStats netfault.Stats
	Soak      SoakReport
	// Problems are failures the harness saw itself: a wiped member that was
	// not refused, a cluster that did not recover, a client that crashed.
	Problems []string
	Elapsed  time.Duration
	// ArtifactPaths lists what was written for a failed check.
	ArtifactPaths []string
}

// OK reports whether every check passed and the harness saw no problem.
func (r *Result) OK() bool {
	return r.Report.OK() && len(r.Problems) == 0 && len(r.Soak.Flags) == 0
}

// nemesisConfig returns the nemesis's part of c.
func (c Config) nemesisConfig() nemesis.Config {
	return nemesis.Config{
		Seed: c.Seed, Nodes: c.Nodes, Faults: c.Faults,
		PauseRestartsResource: c.PauseRestartsResource, StackChance: c.StackChance,
		Witness: c.Witness, Logf: c.Logf,
	}
}

// initialIDs are the ids of the initial members, as the harness names them.
func initialIDs(nodes int) []string {
	var out []string
	for i := 1; i <= nodes; i++ {
		out = append(out, fmt.Sprintf("n%d", i))
	}
	return out
}

// locks are the locks the clients compete for: few, so that they collide.
var locks = []string{"a", "b", "c"}

// sessionLocks are the locks the session clients compete for, each
// holding all of them under its session; apart from locks, so that the
// lock clients' histories stay as they were.
var sessionLocks = []string{"sa", "sb", "sc"}

// rwLocks are the locks the rw clients take shared or exclusive; apart
// from the others, whose lock model allows one holder.
var rwLocks = []string{"ra", "rb"}

// durableLocks are the locks the durable clients queue for (issue 28's
// durable waiters); apart from every other client's.
var durableLocks = []string{"da", "db"}

// semaphore and election are the semaphore and the election the other
// clients compete for; sessionSemaphore is the session clients'.
const (
	semaphore        = "s"
	election         = "e"
	sessionSemaphore = "ss"
)

// workloads returns every client process's part, in client order: the lock
// clients, then the semaphore clients, then the campaigners, then the
// session clients, then the rw clients, then the durable ones.
func (c Config) workloads() []workload.Config {
	var out []workload.Config
	for range c.Clients {
		out = append(out, workload.Config{Locks: locks, Replays: true, MissingToken: true, Revokes: true})
	}
	for range max(c.SemClients, 0) {
		out = append(out, workload.Config{Role: workload.RoleSemaphore, Semaphore: semaphore, Limit: c.SemLimit})
	}
	for range max(c.Campaigners, 0) {
		out = append(out, workload.Config{Role: workload.RoleElection, Election: election})
	}
	for range max(c.SessionClients, 0) {
		out = append(out, workload.Config{Role: workload.RoleSession, Locks: sessionLocks, Semaphore: sessionSemaphore, Limit: c.SemLimit})
	}
	for range max(c.RWClients, 0) {
		out = append(out, workload.Config{Role: workload.RoleRW, Locks: rwLocks})
	}
	for range max(c.DurableClients, 0) {
		out = append(out, workload.Config{Role: workload.RoleRW, Locks: durableLocks, Durable: true})
	}
	for i := range out {
		out[i].Client, out[i].Seed, out[i].MinTTL, out[i].MaxTTL = i, c.Seed, minTTL, maxTTL
	}
	return out
}

// Lock TTLs: short, so that pauses and partitions outlive them.
const (
	minTTL = 500 * time.Millisecond
	maxTTL = 2 * time.Second
)

// Run performs one chaos run. Every process it starts is killed before it
// returns; the error is for a run that could not be carried out at all.
func Run(ctx context.Context, cfg Config) (*Result, error) {
	if err := cfg.defaults(); err != nil {
		return nil, err
	}
	start := time.Now()
	res := &Result{Config: cfg}
	logs := filepath.Join(cfg.Artifacts, "logs")
	if err := os.MkdirAll(logs, 0o755); err != nil {
		return nil, err
	}
	group := cfg.Group
	if group == nil {
		group = &harness.Group{}
	}
	defer group.KillAll()

	cl, rs, err := startServers(ctx, cfg, group, logs)
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	defer rs.Close()

	watch, err := startWatcher(ctx, cl)
	if err != nil {
		return nil, err
	}
	rec := workload.NewRecorder()
	ev := &nemesis.EventLog{}
	clients, err := startClients(cfg, group, cl, rs, rec, logs, res)
	if err != nil {
		return nil, err
	}
	soak := &soakSampler{begin: time.Now(), logf: cfg.Logf}
	nem := nemesis.New(cfg.nemesisConfig(), nemesis.Target{
		Cluster: cl, Resource: rs, Clients: clients, Recorder: rec, Events: ev,
		Problem: res.problem, Sample: func(ctx context.Context) { soak.sample(ctx, cl) },
	})
	res.Faults, res.Stacked, res.Incomplete = nem.Faults, nem.Stacked, nem.Incomplete
	ev.Add(history.EventKind("start"), "workload started")
	soak.sample(ctx, cl)
	nem.Run(ctx, cfg.Duration)

	// Heal everything, take the last sample under load, let the clients
	// finish, then look at the end state.
	if err := nem.HealAll(ctx); err != nil {
		res.problem("after the run: %v", err)
	}
	soak.sample(ctx, cl)
	res.Soak = judgeSoak(soak.samples)
	res.Gated, res.HTTPStats = cl.HTTP().Counts(), cl.HTTP().Stats()
	stopClients(clients, res)
	end := workload.Now()
	ev.Add(history.EventKind("stop"), "workload stopped")
	h := collect(ctx, cl, rs, rec, ev, watch, end, res)
	res.History = h
	res.judge(start)
	return res, nil
}

// judge checks the history, and writes the summary and, if a check
// failed, the artifacts.
func (r *Result) judge(start time.Time) {
	cfg, h := r.Config, r.History
	var err error
	cfg.Logf("checking %d operations", len(h.Ops))
	r.Report = checker.Check(h, checker.Options{Timeout: cfg.CheckTimeout})
	r.Elapsed = time.Since(start)
	if !r.Report.OK() {
		if r.ArtifactPaths, err = r.Report.WriteArtifacts(cfg.Artifacts); err != nil {
			r.problem("writing artifacts: %v", err)
		}
	}
	if err := os.WriteFile(filepath.Join(cfg.Artifacts, "summary.txt"), []byte(r.Summary()), 0o644); err != nil {
		r.problem("writing summary: %v", err)
	}
}

// startServers starts the cluster and the resource. On an error it closes
// what it opened; the group kills the processes.
func startServers(ctx context.Context, cfg Config, group *harness.Group, logs string) (*harness.Cluster, *harness.Resource, error) {
	cl, err := harness.NewCluster(harness.Options{
		Bin: cfg.Bin, Dir: filepath.Join(cfg.WorkDir, "nodes"), LogDir: logs,
		Nodes: cfg.Nodes, Spares: 1, Clients: len(cfg.workloads()), Group: group, LogStore: cfg.LogStore,
	})
	if err != nil {
		return nil, nil, err
	}
	if err := harness.Within(ctx, time.Minute, cl.Start); err != nil {
		cl.Close()
		return nil, nil, fmt.Errorf("start cluster: %w (logs in %s)", err, logs)
	}
	rs, err := harness.NewResource(harness.ResourceOptions{
		Bin: cfg.Bin, DataDir: filepath.Join(cfg.WorkDir, "resource"),
		Log: filepath.Join(logs, "resource.log"), Broken: cfg.Broken, Group: group,
	})
	if err != nil {
		cl.Close()
		return nil, nil, err
	}
	if err := harness.Within(ctx, 30*time.Second, rs.Start); err != nil {
		rs.Close()
		cl.Close()
		return nil, nil, fmt.Errorf("start resource: %w", err)
	}
	cfg.Logf("cluster of %d up, resource at %s; logs in %s", cfg.Nodes, rs.URL(), logs)
	return cl, rs, nil
}

// collect assembles the history once the clients have stopped at end: their
// ops and observations, the nemesis's events, the resource's log, the final
// reads, the members' digests and the watcher's stream.
func collect(ctx context.Context, cl *harness.Cluster, rs *harness.Resource, rec *workload.Recorder,
	ev *nemesis.EventLog, watch *watcher, end int64, res *Result) history.History {
	h := history.History{Ops: rec.Ops(end), Events: ev.List(), Accepted: rs.Accepted(), Observations: rec.Observations()}
	var err error
	if h.FinalReads, err = finalReads(ctx, cl, rs); err != nil {
		res.problem("final reads: %v", err)
	}
	if h.MemberHashes, err = memberHashes(ctx, cl); err != nil {
		res.problem("member digests: %v", err)
	}
	if h.Watch, err = watch.finish(ctx); err != nil {
		res.problem("watcher: %v", err)
	}
	return h
}

func (r *Result) problem(format string, args ...any) {
	r.Problems = append(r.Problems, fmt.Sprintf(format, args...))
}

// startClients starts the client processes, each feeding the recorder.
func startClients(cfg Config, group *harness.Group, cl *harness.Cluster, rs *harness.Resource,
	rec *workload.Recorder, logs string, res *Result) ([]*harness.Proc, error) {
	var procs []*harness.Proc
	for i, wc := range cfg.workloads() {
		wc.Endpoints, wc.Resource = cl.ClientEndpoints(i), rs.URL()
		b, err := json.Marshal(wc)
		if err != nil {
			return nil, err
		}
		var once sync.Once
		p, err := group.Start(harness.Spec{
			Name: harness.ClientName(i), Path: cfg.ClientBin, Args: cfg.ClientArgs,
			Env:   []string{workload.ConfigEnv + "=" + string(b)},
			Log:   filepath.Join(logs, fmt.Sprintf("client-%d.log", i)),
			Stdin: true,
			Lines: func(line []byte) {
				if err := rec.Feed(i, line); err != nil {
					once.Do(func() { cfg.Logf("client %d: %v", i, err) })
				}
			},
		})
		if err != nil {
			return nil, err
		}
		procs = append(procs, p)
	}
	return procs, nil
}

// stopClients closes every client's stdin, which makes it finish its
// iteration and exit, and kills those that do not.
func stopClients(clients []*harness.Proc, res *Result) {
	for _, p := range clients {
		if !p.Running() {
			res.problem("%s exited during the run: %v", p.Name(), p.ExitErr())
			continue
		}
		_ = p.Resume()
		_ = p.CloseStdin()
	}
	deadline := time.Now().Add(45 * time.Second)
	for _, p := range clients {
		if !p.WaitExit(time.Until(deadline)) {
			res.problem("%s did not stop within 45s; killed", p.Name())
			p.Kill()
		}
	}
}

// finalReads reads every key from the cluster (linearizably, through the
// leader) and from the resource.
func finalReads(ctx context.Context, cl *harness.Cluster, rs *harness.Resource) ([]history.FinalRead, error) {
	c, err := client.New(cl.HTTPAddrs(), client.WithTimeout(2*time.Second))
	if err != nil {
		return nil, err
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	reads := []history.FinalRead{}
	// The election's and the session permits' keys are the resource's
	// only: they have no key in the cluster.
	for _, name := range []string{election, sessionSemaphore} {
		r, err := finalResourceRead(ctx, rs, workload.ResourceKey(name))
		if err != nil {
			return nil, err
		}
		reads = append(reads, r)
	}
	for _, lock := range slices.Concat(locks, sessionLocks, workload.MultiNames(locks)) {
		key := workload.KVKey(lock)
		var r history.FinalRead
		err := harness.Retry(ctx, func() error {
			v, token, err := c.Get(ctx, key)
			switch {
			case errors.Is(err, client.ErrNotFound):
				r = history.FinalRead{Key: key}
				return nil
			case err != nil:
				return err
			}
			r = history.FinalRead{Key: key, Found: true, Value: string(v), Token: token}
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("%s: %w", key, err)
		}
		reads = append(reads, r)
		if r, err = finalResourceRead(ctx, rs, workload.ResourceKey(lock)); err != nil {
			return nil, err
		}
		reads = append(reads, r)
	}
	return reads, nil
}

func finalResourceRead(ctx context.Context, rs *harness.Resource, key string) (history.FinalRead, error) {
	var r history.FinalRead
	err := harness.Retry(ctx, func() error {
		var err error
		r, err = rs.FinalRead(ctx, key)
		return err
	})
	if err != nil {
		return r, fmt.Errorf("%s: %w", key, err)
	}
	return r, nil
}

// memberHashes waits until no lease is left (locks, permits and sessions:
// an expiry is a log entry, so the applied index moves until then) and
// every member has applied the same log, then returns each member's state
// digest.
func memberHashes(ctx context.Context, cl *harness.Cluster) (map[string]string, error) {
	c, err := client.New(cl.HTTPAddrs(), client.WithTimeout(2*time.Second))
	if err != nil {
		return nil, err
	}
	defer c.Close()
	sessions := workload.NewRawAPI(cl.HTTPAddrs(), 2*time.Second)
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	err = harness.Retry(ctx, func() error {
		held, err := c.Locks(ctx)
		if err == nil && len(held) > 0 {
			return fmt.Errorf("%d locks still held", len(held))
		}
		if err != nil {
			return err
		}
		sems, err := c.Semaphores(ctx)
		if err == nil && len(sems) > 0 {
			return fmt.Errorf("%d semaphores still have permits held", len(sems))
		}
		if err != nil {
			return err
		}
		var open wire.SessionList
		err = sessions.Call(ctx, http.MethodGet, "/v1/sessions", 0, nil, &open)
		if err == nil && len(open.Sessions) > 0 {
			return fmt.Errorf("%d sessions still open", len(open.Sessions))
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	d, err := cl.Digests(ctx)
	if err != nil {
		return nil, err
	}
	digests := map[string]string{}
	for id, s := range d {
		digests[id] = s.Digest
	}
	return digests, nil
}
