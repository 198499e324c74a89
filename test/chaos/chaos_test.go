package chaos

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fencer-io/fencer/test/chaos/brokenfence"
	"github.com/fencer-io/fencer/test/chaos/checker"
	"github.com/fencer-io/fencer/test/chaos/harness"
	"github.com/fencer-io/fencer/test/chaos/nemesis"
	"github.com/fencer-io/fencer/test/chaos/workload"
)

// Flags of the long run; each falls back to an environment variable, so
// that `go test ./...` with other packages can set them too.
var (
	flagDuration  = flag.Duration("chaos.duration", envDuration("CHAOS_DURATION"), "length of TestChaos's run of faults under load; 0 skips it ($CHAOS_DURATION)")
	flagSeed      = flag.Uint64("chaos.seed", envUint("CHAOS_SEED"), "seed of every run; 0 picks one ($CHAOS_SEED)")
	flagNodes     = flag.Int("chaos.nodes", int(envUint("CHAOS_NODES")), "initial members of TestChaos's cluster (default 3) ($CHAOS_NODES)")
	flagClients   = flag.Int("chaos.clients", int(envUint("CHAOS_CLIENTS")), "client processes (default nodes+1) ($CHAOS_CLIENTS)")
	flagFaults    = flag.String("chaos.faults", os.Getenv("CHAOS_FAULTS"), "comma-separated faults of TestChaos (default all) ($CHAOS_FAULTS)")
	flagBroken    = flag.String("chaos.broken-fence", os.Getenv("CHAOS_BROKEN_FENCE"), "run TestChaos against a deliberately broken resource (missing-as-zero,forget-on-restart): it must fail ($CHAOS_BROKEN_FENCE)")
	flagWitness   = flag.String("chaos.witness", os.Getenv("CHAOS_WITNESS"), "initial member spared from kills, wipes and removals, so a soak can judge one process over the whole run; default n1 for runs of 5m or more, none below; \"none\" for none ($CHAOS_WITNESS)")
	flagLogStore  = flag.String("chaos.log-store", os.Getenv("CHAOS_LOG_STORE"), "the members' --log-store: bolt (default), wal, or mixed (odd-numbered nodes bolt, even ones wal) ($CHAOS_LOG_STORE)")
	flagArtifacts = flag.String("chaos.artifacts", os.Getenv("CHAOS_ARTIFACTS"), "directory for logs and failure artifacts (default a temp dir, removed when the run passes) ($CHAOS_ARTIFACTS)")
)

func envDuration(name string) time.Duration {
	d, _ := time.ParseDuration(os.Getenv(name))
	return d
}

func envUint(name string) uint64 {
	n, _ := strconv.ParseUint(os.Getenv(name), 10, 64)
	return n
}

// TestMain doubles as the chaos client and as the broken resource: the
// harness starts this test binary again with workload.ConfigEnv or
// brokenfence.Env set.
func TestMain(m *testing.M) {
	if os.Getenv(workload.ConfigEnv) != "" {
		os.Exit(workload.Main())
	}
	if os.Getenv(brokenfence.Env) != "" {
		os.Exit(brokenfence.Main())
	}
	code := m.Run()
	if buildDir != "" {
		os.RemoveAll(buildDir)
	}
	os.Exit(code)
}

var (
	buildOnce sync.Once
	builtBin  string
	buildErr  error
	buildDir  string
)

// fencerBin builds bin/fencer once per test binary.
func fencerBin(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		if buildDir, buildErr = os.MkdirTemp("", "fencer-chaos-bin-"); buildErr != nil {
			return
		}
		builtBin, buildErr = harness.BuildFencer(buildDir)
	})
	if buildErr != nil {
		t.Fatalf("build fencer: %v", buildErr)
	}
	return builtBin
}

// run performs one chaos run for t, with everything the run starts killed
// at the end whatever happens, and returns its result.
func run(t *testing.T, name string, cfg Config) *Result {
	t.Helper()
	if cfg.Seed == 0 {
		cfg.Seed = *flagSeed
	}
	if cfg.Seed == 0 {
		cfg.Seed = uint64(time.Now().UnixNano())
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cfg.Bin, cfg.ClientBin = fencerBin(t), self
	cfg.WorkDir = t.TempDir()
	// Registered after TempDir, so it runs first: no process outlives its
	// data dir.
	cfg.Group = &harness.Group{}
	t.Cleanup(cfg.Group.KillAll)
	keep := *flagArtifacts != ""
	if keep {
		cfg.Artifacts = filepath.Join(*flagArtifacts, fmt.Sprintf("%s-seed-%d", name, cfg.Seed))
	} else if cfg.Artifacts, err = os.MkdirTemp("", "fencer-chaos-"+name+"-"); err != nil {
		t.Fatal(err)
	}
	cfg.Logf = func(format string, args ...any) {
		t.Logf("%s: %s", time.Now().Format("15:04:05.000"), fmt.Sprintf(format, args...))
	}
	t.Logf("chaos %s: seed %d (replay with -chaos.seed=%d), artifacts in %s", name, cfg.Seed, cfg.Seed, cfg.Artifacts)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	res, err := Run(ctx, cfg)
	if err != nil {
		t.Fatalf("chaos %s (seed %d): %v; logs in %s", name, cfg.Seed, err, cfg.Artifacts)
	}
	t.Log("\n" + res.Summary())
	if res.OK() && !keep {
		os.RemoveAll(cfg.Artifacts)
	}
	return res
}

func requireOK(t *testing.T, res *Result) {
	t.Helper()
	if !res.OK() {
		t.Errorf("chaos run failed (seed %d); history, report and logs in %s", res.Config.Seed, res.Config.Artifacts)
	}
}

// TestChaos is the long run, for `make chaos`: skipped unless a duration
// is given.
func TestChaos(t *testing.T) {
	if *flagDuration == 0 {
		t.Skip("long run: set -chaos.duration (or CHAOS_DURATION)")
	}
	cfg := Config{Nodes: *flagNodes, Clients: *flagClients, Duration: *flagDuration, Broken: *flagBroken, Witness: *flagWitness, LogStore: *flagLogStore}
	if *flagFaults != "" && *flagFaults != "all" {
		cfg.Faults = strings.Split(*flagFaults, ",")
	}
	switch {
	case cfg.Witness == "none":
		cfg.Witness = ""
	case cfg.Witness == "" && cfg.Duration >= soakFrom:
		cfg.Witness = "n1"
	}
	requireOK(t, run(t, "long", cfg))
}

// soakFrom is the length from which TestChaos is a soak: one member, the
// witness, is spared from kills and wipes so that its growth can be judged
// over the whole run.
const soakFrom = 5 * time.Minute

// TestChaosShort is the run every `go test ./...` makes: half a minute of
// faults on 3 nodes and half a minute on 5, the faults split between them
// so that every kind is dealt, and stacked more often than in a long run.
// With TestChaosBrokenResource's 20s, 80s of faults in all.
func TestChaosShort(t *testing.T) {
	if testing.Short() {
		t.Skip("-short")
	}
	t.Run("3-nodes", func(t *testing.T) {
		requireOK(t, run(t, "short-3", Config{Nodes: 3, Duration: 30 * time.Second, CheckTimeout: 30 * time.Second, StackChance: 0.5, Faults: []string{
			nemesis.FaultKillLeader, nemesis.FaultPauseClient, nemesis.FaultPauseLeader, nemesis.FaultIsolateLeader,
			nemesis.FaultOneWay, nemesis.FaultWipedRefused, nemesis.FaultRestartResource, nemesis.FaultClientCut, nemesis.FaultHTTPCut, nemesis.FaultDiskStall,
		}}))
	})
	// The 5 members mix the log stores (n2 and n4 wal, the others bolt).
	t.Run("5-nodes", func(t *testing.T) {
		requireOK(t, run(t, "short-5", Config{Nodes: 5, LogStore: "mixed", Duration: 30 * time.Second, CheckTimeout: 30 * time.Second, StackChance: 0.5, Faults: []string{
			nemesis.FaultKillNode, nemesis.FaultSplit, nemesis.FaultMembership, nemesis.FaultReplace,
			nemesis.FaultKillAll, nemesis.FaultDelay, nemesis.FaultPauseClient, nemesis.FaultClientCut, nemesis.FaultHTTPCut, nemesis.FaultDiskFull,
		}}))
	})
}

// TestChaosBrokenResource is the negative control: the same workload
// against a resource that forgets its high-water marks when it restarts,
// with clients paused past their leases across those restarts. The checker
// must see the stale writes it lets through.
func TestChaosBrokenResource(t *testing.T) {
	if testing.Short() {
		t.Skip("-short")
	}
	// Whether a run catches the bug is a matter of timing: a paused
	// writer's stale write must reach the restarted resource before a
	// live writer teaches it a newer token again. A run that does not
	// catch it is run again with a new seed, up to three runs in all; a
	// checker that cannot catch it fails all three.
	for attempt := 1; ; attempt++ {
		res := run(t, "broken-resource", Config{
			Nodes: 3, Duration: 20 * time.Second, CheckTimeout: 30 * time.Second,
			Faults:                []string{nemesis.FaultPauseClient, nemesis.FaultRestartResource},
			PauseRestartsResource: 1,
			Broken:                "forget-on-restart",
		})
		if len(res.Problems) > 0 {
			t.Errorf("harness problems: %v", res.Problems)
		}
		caught := false
		for _, name := range []string{checker.CheckFenceOrder, checker.CheckKeys} {
			if v, ok := res.Report.Verdict(name); ok && v.Status == checker.Fail {
				caught = true
			}
		}
		if *flagArtifacts == "" && (caught || attempt < 3) {
			os.RemoveAll(res.Config.Artifacts)
		}
		if caught {
			t.Logf("negative control: the checker flagged the broken resource, as it must (run %d)", attempt)
			return
		}
		if attempt == 3 {
			t.Fatalf("the checker did not flag a resource that forgets its fence on restart in %d runs (last seed %d)", attempt, res.Config.Seed)
		}
		t.Logf("run %d (seed %d): no stale write reached the restarted resource first; running again", attempt, res.Config.Seed)
	}
}
