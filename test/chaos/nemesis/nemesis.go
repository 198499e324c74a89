package nemesis

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/fencer-io/fencer/test/chaos/harness"
	"github.com/fencer-io/fencer/test/chaos/history"
	"github.com/fencer-io/fencer/test/chaos/workload"
)

// Fault names.
const (
	FaultKillLeader      = "kill-leader"      // SIGKILL the leader, restart it on its data dir
	FaultKillNode        = "kill-node"        // SIGKILL a random member, restart it
	FaultPauseLeader     = "pause-leader"     // SIGSTOP the leader past the election timeout
	FaultPauseClient     = "pause-client"     // SIGSTOP a lock-holding client past its TTL
	FaultIsolateLeader   = "isolate-leader"   // cut the leader (and some clients) off from the rest
	FaultSplit           = "split"            // minority/majority partition, clients on both sides
	FaultOneWay          = "one-way"          // drop one direction of Raft between the leader and a follower
	FaultDelay           = "delay"            // delay every Raft and HTTP link
	FaultClientCut       = "client-cut"       // cut clients off the leader, not off the followers
	FaultHTTPCut         = "http-cut"         // cut followers' HTTP to the leader, not their Raft
	FaultMembership      = "membership"       // add a member, or remove one (maybe the leader)
	FaultReplace         = "replace"          // remove a member, wipe it, join it again
	FaultWipedRefused    = "wiped-refused"    // a wiped member under its old id must be refused
	FaultKillAll         = "kill-all"         // SIGKILL every member, restart them all
	FaultRestartResource = "restart-resource" // SIGKILL the resource, restart it
	FaultDiskStall       = "disk-stall"       // the leader's (or a follower's) log writes hang
	FaultDiskFull        = "disk-full"        // a member's log writes fail with ENOSPC
)

// AllFaults lists every fault, in the order they are documented.
var AllFaults = []string{
	FaultKillLeader, FaultKillNode, FaultPauseLeader, FaultPauseClient,
	FaultIsolateLeader, FaultSplit, FaultOneWay, FaultDelay, FaultClientCut, FaultHTTPCut,
	FaultMembership, FaultReplace, FaultWipedRefused, FaultKillAll, FaultRestartResource,
	FaultDiskStall, FaultDiskFull,
}

// lever is what a fault acts through. Two faults on one lever are never
// active at once, except on leverProcess, where each acts on a member of
// its own: healing a network fault heals every link, a membership change
// rewrites the harness's idea of the members, and a client pause may
// restart the resource itself.
type lever int

const (
	leverProcess    lever = iota // a member's process: SIGKILL, SIGSTOP
	leverNetwork                 // the Raft and HTTP proxies
	leverMembership              // the Raft configuration
	leverResource                // the resource, and the clients whose writes it fences
	leverEverything              // every member at once: never stacked
)

// faultKind is what the nemesis needs to know of a fault to inject it
// alone or stacked on another.
type faultKind struct {
	lever lever
	// disturbs is how many members the fault takes out of the quorum while
	// it is active, at least (a split may take more, up to its budget): a
	// member killed, paused, cut off, wiped, or being added or removed.
	disturbs int
	// inject puts the fault in place and tells how to undo it. budget is
	// the most members it may disturb; it must leave busy members alone.
	inject func(n *Nemesis, ctx context.Context, budget int) (*active, error)
}

// kinds describes every fault. A new kind is one entry here and its inject
// function: see the package doc.
var kinds = map[string]faultKind{
	FaultKillLeader:      {leverProcess, 1, (*Nemesis).killLeader},
	FaultKillNode:        {leverProcess, 1, (*Nemesis).killNode},
	FaultPauseLeader:     {leverProcess, 1, (*Nemesis).pauseLeader},
	FaultPauseClient:     {leverResource, 0, (*Nemesis).pauseClient},
	FaultIsolateLeader:   {leverNetwork, 1, (*Nemesis).isolateLeader},
	FaultSplit:           {leverNetwork, 1, (*Nemesis).split},
	FaultOneWay:          {leverNetwork, 1, (*Nemesis).oneWay},
	FaultDelay:           {leverNetwork, 0, (*Nemesis).delay},
	FaultClientCut:       {leverNetwork, 0, (*Nemesis).clientCut},
	FaultHTTPCut:         {leverNetwork, 0, (*Nemesis).httpCut},
	FaultMembership:      {leverMembership, 1, (*Nemesis).membership},
	FaultReplace:         {leverMembership, 1, (*Nemesis).replace},
	FaultWipedRefused:    {leverMembership, 1, (*Nemesis).wipedRefused},
	FaultKillAll:         {leverEverything, 0, (*Nemesis).killAll}, // disturbs every member, but is never stacked
	FaultRestartResource: {leverResource, 0, (*Nemesis).restartResource},
	FaultDiskStall:       {leverProcess, 1, (*Nemesis).diskStall},
	FaultDiskFull:        {leverProcess, 1, (*Nemesis).diskFull},
}

// active is a fault in place.
type active struct {
	name string
	kind faultKind
	// hold is how long to leave it in place before heal; zero for a fault
	// that is over once injected (a membership change).
	hold time.Duration
	heal func(context.Context) error // nil: nothing to undo
	// busy are the members it acts on: a stacked fault leaves them alone.
	busy []*harness.Node
	// disturbed is how many members it takes out of the quorum.
	disturbed int
	until     time.Time // set by the nemesis: when to heal
}

// Events the checker reads nothing from but the reader does.
const (
	evFault   history.EventKind = "fault"
	evHeal    history.EventKind = "heal"
	evRefused history.EventKind = "refused"
)

// recoverWithin bounds how long the cluster may take to become healthy
// after a fault is undone. Generous: the machine is small and shared.
const recoverWithin = 90 * time.Second

// Config tunes a nemesis. Zero values mean none, not defaults: the suite's
// Config fills them in.
type Config struct {
	Seed   uint64   // everything random derives from it
	Nodes  int      // initial members: membership adds one only while there are no more
	Faults []string // the faults to deal
	// PauseRestartsResource is the chance that a client pause also
	// restarts the resource just before the client resumes.
	PauseRestartsResource float64
	// StackChance is the chance of stacking a second fault on one that
	// holds (negative: never).
	StackChance float64
	// Witness names a member that no fault kills, wipes or removes; empty:
	// none.
	Witness string
	Logf    func(format string, args ...any)
}

// Target is what a nemesis acts on, and where it tells what it did.
type Target struct {
	Cluster  *harness.Cluster
	Resource *harness.Resource
	Clients  []*harness.Proc
	Recorder *workload.Recorder // which clients hold a lock, to pause one
	Events   *EventLog
	// Problem records a failure the nemesis saw itself: a wiped member
	// that was not refused, a cluster that did not recover.
	Problem func(format string, args ...any)
	// Sample is called after each round, once the cluster is healthy
	// again (the soak's samples).
	Sample func(context.Context)
}

// Nemesis injects faults into a cluster, one round at a time.
type Nemesis struct {
	rng     *rand.Rand
	cfg     Config
	cl      *harness.Cluster
	rs      *harness.Resource
	clients []*harness.Proc
	rec     *workload.Recorder
	ev      *EventLog
	problem func(format string, args ...any)
	sample  func(context.Context)
	deck    []string
	actives []*active // faults in place, in the order injected

	// Faults counts the faults injected, by name, stacked ones included.
	Faults map[string]int
	// Stacked counts the stacked pairs, as "first+second".
	Stacked map[string]int
	// Incomplete counts the faults that could not be put in place or
	// healed as planned (no lock held to pause, no free leader).
	Incomplete map[string]int
}

// New returns a nemesis that acts on t as cfg says.
func New(cfg Config, t Target) *Nemesis {
	return &Nemesis{
		rng: rand.New(rand.NewPCG(cfg.Seed, 0x6e656d65)), cfg: cfg,
		cl: t.Cluster, rs: t.Resource, clients: t.Clients, rec: t.Recorder, ev: t.Events,
		problem: t.Problem, sample: t.Sample,
		Faults: map[string]int{}, Stacked: map[string]int{}, Incomplete: map[string]int{},
	}
}

// CheckFaults returns an error for the first of faults that is no fault's
// name.
func CheckFaults(faults []string) error {
	for _, f := range faults {
		if _, ok := kinds[f]; !ok {
			return fmt.Errorf("unknown fault %q (known: %v)", f, AllFaults)
		}
	}
	return nil
}

// Run injects faults until d has passed, or the cluster fails to recover.
// Each round deals one fault from the deck and, with Config.StackChance,
// stacks a second on it while it holds; then heals both, each when its
// hold ends, and waits for the cluster to be healthy.
func (n *Nemesis) Run(ctx context.Context, d time.Duration) {
	deadline := time.Now().Add(d)
	n.hold(ctx, n.between(time.Second, 2*time.Second)) // let the clients get going
	for time.Now().Before(deadline) && ctx.Err() == nil {
		name := n.next()
		first := n.inject(ctx, name, "")
		if first != nil && first.hold > 0 && first.kind.lever != leverEverything && n.rng.Float64() < n.cfg.StackChance {
			n.hold(ctx, n.between(0, first.hold/2))
			if second := n.pickStacked(); second != "" {
				if n.inject(ctx, second, name) != nil {
					n.Stacked[name+"+"+second]++
				}
			}
		}
		n.healActives(ctx)
		if err := n.HealAll(ctx); err != nil {
			n.problem("after %s: %v", name, err)
			return
		}
		n.sample(ctx)
		n.hold(ctx, n.between(300*time.Millisecond, 1500*time.Millisecond))
	}
}

// inject puts fault name in place, stacked on another if on is set, and
// records it among the actives; it returns nil if the fault could not be
// put in place.
func (n *Nemesis) inject(ctx context.Context, name, on string) *active {
	kind := kinds[name]
	if on == "" {
		n.cfg.Logf("fault %s", name)
	} else {
		n.cfg.Logf("fault %s, stacked on %s", name, on)
		n.ev.Add(evFault, fmt.Sprintf("stacking %s on %s", name, on))
	}
	n.Faults[name]++
	a, err := kind.inject(n, ctx, budget(len(n.cl.Members()), n.actives))
	if err != nil {
		n.Incomplete[name]++
		n.cfg.Logf("fault %s: %v", name, err)
		n.ev.Add(evFault, fmt.Sprintf("%s did not complete: %v", name, err))
		return nil
	}
	a.name, a.kind, a.until = name, kind, time.Now().Add(a.hold)
	n.actives = append(n.actives, a)
	return a
}

// budget is how many more of members may be disturbed at once: a minority of
// the members, less those the active faults disturb. Staying within it
// keeps a majority of the voters running, connected and holding their
// data all along, so a leader exists, a stacked fault's own steps (a
// removal, a join, a refusal, which need a quorum) complete, and once
// every fault heals the cluster recovers as after a single one.
//
// With 3 members the budget is 1: two faults stack only when one of them
// disturbs no member (a delay, an HTTP cut, a client pause, a resource
// restart) - say a leader kill while followers cannot forward. With 5 it
// is 2: a partition of one member plus a kill of another, a pause plus a
// membership change, two kills; 3 of 5 stay a majority. A membership
// change counts as one: adding a member to M makes M+1 with the joiner
// still catching up, and M+1 - ((M-1)/2) >= (M+1)/2 + 1 members still
// form a majority of it; removing one leaves M-1 of which at most
// (M-1)/2 - 1 are disturbed, again less than half. kill-all disturbs
// every member and is never stacked.
func budget(members int, actives []*active) int {
	b := (members - 1) / 2
	for _, a := range actives {
		b -= a.disturbed
	}
	return b
}

// pickStacked chooses a fault to stack on those active, "" when none fits.
func (n *Nemesis) pickStacked() string {
	fit := stackable(n.cfg.Faults, n.actives, len(n.cl.Members()))
	if len(fit) == 0 {
		return ""
	}
	return fit[n.rng.IntN(len(fit))]
}

// stackable returns the faults among enabled that may join actives in a
// cluster of members: on a lever they leave free, and within the budget.
func stackable(enabled []string, actives []*active, members int) []string {
	budget := budget(members, actives)
	var fit []string
	for _, name := range enabled {
		k := kinds[name]
		if k.lever == leverEverything || k.disturbs > budget || !leverFree(actives, k.lever) {
			continue
		}
		fit = append(fit, name)
	}
	return fit
}

func leverFree(actives []*active, l lever) bool {
	for _, a := range actives {
		if a.kind.lever == l && l != leverProcess {
			return false
		}
	}
	return true
}

// healActives heals each active fault when its hold ends, earliest first,
// so that stacked faults end in either order.
func (n *Nemesis) healActives(ctx context.Context) {
	slices.SortStableFunc(n.actives, func(a, b *active) int { return a.until.Compare(b.until) })
	for _, a := range n.actives {
		n.hold(ctx, time.Until(a.until))
		if a.heal == nil {
			continue
		}
		if err := a.heal(ctx); err != nil {
			n.Incomplete[a.name]++
			n.cfg.Logf("healing %s: %v", a.name, err)
			n.ev.Add(evHeal, fmt.Sprintf("healing %s did not complete: %v", a.name, err))
		}
	}
	n.actives = nil
}

// next deals the next fault from a shuffled deck of the enabled ones.
func (n *Nemesis) next() string {
	if len(n.deck) == 0 {
		n.deck = append([]string(nil), n.cfg.Faults...)
		n.rng.Shuffle(len(n.deck), func(i, j int) { n.deck[i], n.deck[j] = n.deck[j], n.deck[i] })
	}
	f := n.deck[0]
	n.deck = n.deck[1:]
	return f
}

// HealAll undoes anything left: heals the network, continues paused
// processes, restarts members and the resource that are down, and waits
// for the cluster to be healthy.
func (n *Nemesis) HealAll(ctx context.Context) error {
	n.cl.HealNetwork()
	for _, p := range n.clients {
		if p.Running() {
			_ = p.Resume()
		}
	}
	for _, m := range n.cl.Members() {
		if m.Running() {
			_ = n.cl.Resume(m)
		} else if err := n.cl.Restart(m); err != nil {
			return err
		}
	}
	if !n.rs.Running() {
		if err := harness.Within(ctx, 30*time.Second, n.rs.Start); err != nil {
			return err
		}
	}
	start := time.Now()
	if err := harness.Within(ctx, recoverWithin, n.cl.WaitHealthy); err != nil {
		return fmt.Errorf("cluster not healthy within %v: %w", recoverWithin, err)
	}
	if waited := time.Since(start); waited > 10*time.Second {
		n.cfg.Logf("cluster took %v to recover", waited.Round(time.Millisecond))
	}
	return nil
}

func (n *Nemesis) between(lo, hi time.Duration) time.Duration {
	return lo + time.Duration(n.rng.Int64N(int64(hi-lo)+1))
}

// hold keeps a fault in place for d: sleeping here is the point.
func (n *Nemesis) hold(ctx context.Context, d time.Duration) {
	if d <= 0 {
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// busy reports whether an active fault acts on m.
func (n *Nemesis) busy(m *harness.Node) bool {
	for _, a := range n.actives {
		if slices.Contains(a.busy, m) {
			return true
		}
	}
	return false
}

// spared reports whether m must outlive the run (Config.Witness): no
// fault kills, wipes or removes it.
func (n *Nemesis) spared(m *harness.Node) bool { return m.ID == n.cfg.Witness }

// leader waits up to 10s for a leader, to leave it alone.
func (n *Nemesis) leader(ctx context.Context) (*harness.Node, error) {
	return n.awaitLeader(ctx, false)
}

// freeLeader waits up to 10s for a leader that no active fault acts on,
// to act on it.
func (n *Nemesis) freeLeader(ctx context.Context) (*harness.Node, error) {
	return n.awaitLeader(ctx, true)
}

func (n *Nemesis) awaitLeader(ctx context.Context, free bool) (*harness.Node, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	var l *harness.Node
	err := harness.Retry(ctx, func() error {
		var err error
		if l, _, err = n.cl.Leader(ctx); err != nil {
			return err
		}
		if free && n.busy(l) {
			return fmt.Errorf("the leader, %s, is already under a fault", l.ID)
		}
		return nil
	})
	return l, err
}

// free returns the members no active fault acts on, but for except;
// destructive leaves out the witness too.
func (n *Nemesis) free(destructive bool, except ...*harness.Node) []*harness.Node {
	var out []*harness.Node
	for _, m := range n.cl.Members() {
		if !n.busy(m) && !slices.Contains(except, m) && !(destructive && n.spared(m)) {
			out = append(out, m)
		}
	}
	return out
}

// pick returns a random element of nodes, or an error saying there is none.
func (n *Nemesis) pick(nodes []*harness.Node, what string) (*harness.Node, error) {
	if len(nodes) == 0 {
		return nil, errors.New("no " + what + " to act on")
	}
	return nodes[n.rng.IntN(len(nodes))], nil
}

// clientNames returns the clients' names in the HTTP mesh, shuffled.
func (n *Nemesis) clientNames() []string {
	var out []string
	for _, i := range n.rng.Perm(len(n.clients)) {
		out = append(out, harness.ClientName(i))
	}
	return out
}

func ids(nodes []*harness.Node) string {
	var s []string
	for _, m := range nodes {
		s = append(s, m.ID)
	}
	return strings.Join(s, ",")
}
