package chaos

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/fencer-io/fencer/test/chaos/checker"
	"github.com/fencer-io/fencer/test/chaos/harness"
	"github.com/fencer-io/fencer/test/chaos/workload"
)

// Fault names.
const (
	FaultKillLeader      = "kill-leader"      // SIGKILL the leader, restart it on its data dir
	FaultKillNode        = "kill-node"        // SIGKILL a random member, restart it
	FaultPauseLeader     = "pause-leader"     // SIGSTOP the leader past the election timeout
	FaultPauseClient     = "pause-client"     // SIGSTOP a lock-holding client past its TTL
	FaultIsolateLeader   = "isolate-leader"   // cut every Raft link of the leader
	FaultSplit           = "split"            // minority/majority partition
	FaultOneWay          = "one-way"          // drop one direction between the leader and a follower
	FaultDelay           = "delay"            // delay every Raft link
	FaultMembership      = "membership"       // add a member, or remove one (maybe the leader)
	FaultReplace         = "replace"          // remove a member, wipe it, join it again
	FaultWipedRefused    = "wiped-refused"    // a wiped member under its old id must be refused
	FaultKillAll         = "kill-all"         // SIGKILL every member, restart them all
	FaultRestartResource = "restart-resource" // SIGKILL the resource, restart it
)

// AllFaults lists every fault, in the order they are documented.
var AllFaults = []string{
	FaultKillLeader, FaultKillNode, FaultPauseLeader, FaultPauseClient,
	FaultIsolateLeader, FaultSplit, FaultOneWay, FaultDelay,
	FaultMembership, FaultReplace, FaultWipedRefused, FaultKillAll, FaultRestartResource,
}

// faults maps each name to its injection. A fault holds itself for a while
// and undoes what it did; the nemesis then waits for the cluster to be
// healthy before the next.
var faults = map[string]func(*nemesis, context.Context) error{
	FaultKillLeader:      (*nemesis).killLeader,
	FaultKillNode:        (*nemesis).killNode,
	FaultPauseLeader:     (*nemesis).pauseLeader,
	FaultPauseClient:     (*nemesis).pauseClient,
	FaultIsolateLeader:   (*nemesis).isolateLeader,
	FaultSplit:           (*nemesis).split,
	FaultOneWay:          (*nemesis).oneWay,
	FaultDelay:           (*nemesis).delay,
	FaultMembership:      (*nemesis).membership,
	FaultReplace:         (*nemesis).replace,
	FaultWipedRefused:    (*nemesis).wipedRefused,
	FaultKillAll:         (*nemesis).killAll,
	FaultRestartResource: (*nemesis).restartResource,
}

// Events the checker reads nothing from but the reader does.
const (
	evFault   checker.EventKind = "fault"
	evHeal    checker.EventKind = "heal"
	evRefused checker.EventKind = "refused"
)

// recoverWithin bounds how long the cluster may take to become healthy
// after a fault is undone. Generous: the machine is small and shared.
const recoverWithin = 90 * time.Second

type nemesis struct {
	rng     *rand.Rand
	cfg     Config
	cl      *harness.Cluster
	rs      *harness.Resource
	clients []*harness.Proc
	rec     *workload.Recorder
	ev      *eventLog
	res     *Result
	deck    []string
}

// run injects faults until d has passed, or the cluster fails to recover.
func (n *nemesis) run(ctx context.Context, d time.Duration) {
	deadline := time.Now().Add(d)
	n.hold(ctx, n.between(time.Second, 2*time.Second)) // let the clients get going
	for time.Now().Before(deadline) && ctx.Err() == nil {
		name := n.next()
		n.cfg.Logf("fault %s", name)
		n.res.Faults[name]++
		if err := faults[name](n, ctx); err != nil {
			n.cfg.Logf("fault %s: %v", name, err)
			n.ev.add(evFault, fmt.Sprintf("%s did not complete: %v", name, err))
		}
		if err := n.healAll(ctx); err != nil {
			n.res.problem("after %s: %v", name, err)
			return
		}
		n.hold(ctx, n.between(300*time.Millisecond, 1500*time.Millisecond))
	}
}

// next deals the next fault from a shuffled deck of the enabled ones.
func (n *nemesis) next() string {
	if len(n.deck) == 0 {
		n.deck = append([]string(nil), n.cfg.Faults...)
		n.rng.Shuffle(len(n.deck), func(i, j int) { n.deck[i], n.deck[j] = n.deck[j], n.deck[i] })
	}
	f := n.deck[0]
	n.deck = n.deck[1:]
	return f
}

// healAll undoes anything left: heals the network, continues paused
// processes, restarts members and the resource that are down, and waits
// for the cluster to be healthy.
func (n *nemesis) healAll(ctx context.Context) error {
	n.cl.Net().HealAll()
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
		if err := within(ctx, 30*time.Second, n.rs.Start); err != nil {
			return err
		}
	}
	start := time.Now()
	if err := within(ctx, recoverWithin, n.cl.WaitHealthy); err != nil {
		return fmt.Errorf("cluster not healthy within %v: %w", recoverWithin, err)
	}
	if waited := time.Since(start); waited > 10*time.Second {
		n.cfg.Logf("cluster took %v to recover", waited.Round(time.Millisecond))
	}
	return nil
}

func (n *nemesis) between(lo, hi time.Duration) time.Duration {
	return lo + time.Duration(n.rng.Int64N(int64(hi-lo)+1))
}

// hold keeps a fault in place for d: sleeping here is the point.
func (n *nemesis) hold(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

func (n *nemesis) leader(ctx context.Context) (*harness.Node, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	var l *harness.Node
	err := retry(ctx, func() error {
		var err error
		l, _, err = n.cl.Leader(ctx)
		return err
	})
	return l, err
}

// pick returns a random element of nodes.
func (n *nemesis) pick(nodes []*harness.Node) *harness.Node {
	return nodes[n.rng.IntN(len(nodes))]
}

func (n *nemesis) followers(leader *harness.Node) []*harness.Node {
	var out []*harness.Node
	for _, m := range n.cl.Members() {
		if m != leader {
			out = append(out, m)
		}
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

func (n *nemesis) killLeader(ctx context.Context) error {
	l, err := n.leader(ctx)
	if err != nil {
		return err
	}
	return n.killRestart(l, "leader")
}

func (n *nemesis) killNode(ctx context.Context) error {
	return n.killRestart(n.pick(n.cl.Members()), "node")
}

func (n *nemesis) killRestart(m *harness.Node, what string) error {
	n.cl.Kill(m)
	n.ev.add(evFault, fmt.Sprintf("SIGKILL %s %s", what, m.ID))
	n.hold(context.Background(), n.between(500*time.Millisecond, 2*time.Second))
	if err := n.cl.Restart(m); err != nil {
		return err
	}
	n.ev.add(checker.EventRestart, "restarted "+m.ID+" on its data dir")
	return nil
}

func (n *nemesis) pauseLeader(ctx context.Context) error {
	l, err := n.leader(ctx)
	if err != nil {
		return err
	}
	if err := n.cl.Pause(l); err != nil {
		return err
	}
	d := n.between(1500*time.Millisecond, 3*time.Second) // election timeout is 1s
	n.ev.add(evFault, fmt.Sprintf("SIGSTOP leader %s for %v", l.ID, d))
	n.hold(ctx, d)
	n.ev.add(evHeal, "SIGCONT "+l.ID)
	return n.cl.Resume(l)
}

// pauseClient stops a client that holds a lock for longer than its TTL, so
// that its lease expires and another client takes the lock: the writes it
// makes when it wakes up must be refused. Sometimes the resource restarts
// meanwhile, so the refusal must survive the restart.
func (n *nemesis) pauseClient(ctx context.Context) error {
	var who int
	var h workload.Holding
	ctx2, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	err := retry(ctx2, func() error {
		for _, i := range n.rng.Perm(len(n.clients)) {
			var ok bool
			if h, ok = n.rec.Holding(i); ok && n.clients[i].Running() {
				who = i
				return nil
			}
		}
		return errors.New("no client holds a lock")
	})
	if err != nil {
		return err
	}
	p := n.clients[who]
	if err := p.Pause(); err != nil {
		return err
	}
	ttl := time.Duration(h.TTL) * time.Millisecond
	d := ttl + n.between(time.Second, 2*time.Second)
	n.ev.add(evFault, fmt.Sprintf("SIGSTOP client %d holding %s t%d (ttl %v) for %v", who, h.Lock, h.Token, ttl, d))
	n.hold(ctx, d)
	if n.rng.Float64() < n.cfg.PauseRestartsResource {
		if err := n.restartResource(ctx); err != nil {
			_ = p.Resume()
			return err
		}
	}
	n.ev.add(evHeal, fmt.Sprintf("SIGCONT client %d", who))
	return p.Resume()
}

func (n *nemesis) isolateLeader(ctx context.Context) error {
	l, err := n.leader(ctx)
	if err != nil {
		return err
	}
	n.cl.Net().Isolate(l.ID)
	d := n.between(1500*time.Millisecond, 4*time.Second)
	n.ev.add(evFault, fmt.Sprintf("isolate leader %s for %v", l.ID, d))
	n.hold(ctx, d)
	n.cl.Net().HealAll()
	n.ev.add(evHeal, "heal network")
	return nil
}

func (n *nemesis) split(ctx context.Context) error {
	members := n.cl.Members()
	n.rng.Shuffle(len(members), func(i, j int) { members[i], members[j] = members[j], members[i] })
	k := (len(members) - 1) / 2
	minority, majority := members[:k], members[k:]
	var a, b []string
	for _, m := range minority {
		a = append(a, m.ID)
	}
	for _, m := range majority {
		b = append(b, m.ID)
	}
	n.cl.Net().Partition(a, b)
	d := n.between(1500*time.Millisecond, 4*time.Second)
	n.ev.add(evFault, fmt.Sprintf("partition {%s} | {%s} for %v", ids(minority), ids(majority), d))
	n.hold(ctx, d)
	n.cl.Net().HealAll()
	n.ev.add(evHeal, "heal network")
	return nil
}

func (n *nemesis) oneWay(ctx context.Context) error {
	l, err := n.leader(ctx)
	if err != nil {
		return err
	}
	f := n.pick(n.followers(l))
	from, to := l.ID, f.ID
	if n.rng.IntN(2) == 0 {
		from, to = to, from
	}
	n.cl.Net().CutOneWay(from, to)
	d := n.between(1500*time.Millisecond, 4*time.Second)
	n.ev.add(evFault, fmt.Sprintf("drop everything %s sends to %s for %v", from, to, d))
	n.hold(ctx, d)
	n.cl.Net().HealAll()
	n.ev.add(evHeal, "heal network")
	return nil
}

func (n *nemesis) delay(ctx context.Context) error {
	lat := n.between(5*time.Millisecond, 60*time.Millisecond)
	n.cl.Net().DelayAll(lat)
	d := n.between(2*time.Second, 4*time.Second)
	n.ev.add(evFault, fmt.Sprintf("delay every raft link by %v for %v", lat, d))
	n.hold(ctx, d)
	n.cl.Net().HealAll()
	n.ev.add(evHeal, "heal network")
	return nil
}

// membership adds a member while there are only the initial ones, and
// otherwise removes one, a third of the time the leader.
func (n *nemesis) membership(ctx context.Context) error {
	members := n.cl.Members()
	if spares := n.cl.Spares(); len(members) <= n.cfg.Nodes && len(spares) > 0 {
		s := n.pick(spares)
		if err := n.cl.Wipe(s); err != nil {
			return err
		}
		if err := n.cl.Join(s, false); err != nil {
			return err
		}
		n.ev.add(evFault, "add member "+s.ID)
		return nil
	}
	victim := n.pick(members)
	if l, err := n.leader(ctx); err == nil && n.rng.IntN(3) == 0 {
		victim = l
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := n.cl.Remove(ctx, victim); err != nil {
		return err
	}
	n.cl.Kill(victim)
	n.ev.add(evFault, "removed member "+victim.ID)
	return n.cl.Wipe(victim)
}

// replace removes a follower, wipes its disk and joins it again under the
// same id: a new incarnation, admitted because it was removed first.
func (n *nemesis) replace(ctx context.Context) error {
	l, err := n.leader(ctx)
	if err != nil {
		return err
	}
	v := n.pick(n.followers(l))
	n.cl.Kill(v)
	rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := n.cl.Remove(rctx, v); err != nil {
		return err
	}
	if err := n.cl.Wipe(v); err != nil {
		return err
	}
	if err := n.cl.Join(v, false); err != nil {
		return err
	}
	n.ev.add(checker.EventReplace, "replaced "+v.ID+": removed, wiped, joined again")
	return nil
}

// wipedRefused wipes a follower's disk and restarts it under its old id
// without removing it: the cluster must refuse it and the process must exit
// non-zero. Then it comes back properly, with --replace.
func (n *nemesis) wipedRefused(ctx context.Context) error {
	l, err := n.leader(ctx)
	if err != nil {
		return err
	}
	v := n.pick(n.followers(l))
	n.cl.Kill(v)
	if err := n.cl.Wipe(v); err != nil {
		return err
	}
	if err := n.cl.Join(v, false); err != nil {
		return err
	}
	n.ev.add(evFault, "restarted "+v.ID+" wiped, under its old id")
	if err := n.cl.ExpectRefusal(v, 60*time.Second); err != nil {
		n.cl.Kill(v)
		n.res.problem("wiped member: %v", err)
	} else {
		n.ev.add(evRefused, v.ID+" refused and exited")
	}
	if err := n.cl.Wipe(v); err != nil {
		return err
	}
	if err := n.cl.Join(v, true); err != nil {
		return err
	}
	n.ev.add(checker.EventReplace, "rejoined "+v.ID+" with --replace")
	return nil
}

func (n *nemesis) killAll(context.Context) error {
	members := n.cl.Members()
	for _, m := range members {
		n.cl.Kill(m)
	}
	n.ev.add(evFault, "SIGKILL every member: "+ids(members))
	n.hold(context.Background(), n.between(500*time.Millisecond, 1500*time.Millisecond))
	for _, m := range members {
		if err := n.cl.Restart(m); err != nil {
			return err
		}
	}
	n.ev.add(checker.EventRestart, "restarted every member")
	return nil
}

func (n *nemesis) restartResource(ctx context.Context) error {
	n.rs.Kill()
	n.ev.add(evFault, "SIGKILL resource")
	n.hold(ctx, n.between(100*time.Millisecond, time.Second))
	if err := within(ctx, 30*time.Second, n.rs.Start); err != nil {
		return err
	}
	n.ev.add(checker.EventKind("resource-restart"), "resource restarted on its data dir")
	return nil
}
