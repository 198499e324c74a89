package nemesis

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/fencer-io/fencer/test/chaos/harness"
	"github.com/fencer-io/fencer/test/chaos/history"
	"github.com/fencer-io/fencer/test/chaos/workload"
)

// The faults on processes, membership and the resource. Each inject puts
// its fault in place and returns how long to hold it and how to heal it.

// killLeader kills the leader; if that is the witness, which must live, it
// first hands leadership to another member.
func (n *Nemesis) killLeader(ctx context.Context, _ int) (*active, error) {
	l, err := n.freeLeader(ctx)
	if err != nil {
		return nil, err
	}
	if n.spared(l) {
		if err := n.cl.TransferLeader(ctx, l); err != nil {
			return nil, fmt.Errorf("moving leadership off the witness %s: %w", l.ID, err)
		}
		n.ev.Add(evFault, "leadership moved off the witness "+l.ID)
		if l, err = n.freeLeader(ctx); err != nil {
			return nil, err
		}
		if n.spared(l) {
			return nil, fmt.Errorf("the witness %s leads again", l.ID)
		}
	}
	return n.kill(l, "leader"), nil
}

func (n *Nemesis) killNode(_ context.Context, _ int) (*active, error) {
	m, err := n.pick(n.free(true), "member")
	if err != nil {
		return nil, err
	}
	return n.kill(m, "node"), nil
}

func (n *Nemesis) kill(m *harness.Node, what string) *active {
	n.cl.Kill(m)
	n.ev.Add(evFault, fmt.Sprintf("SIGKILL %s %s", what, m.ID))
	return &active{
		hold: n.between(500*time.Millisecond, 2*time.Second),
		heal: func(context.Context) error {
			if err := n.cl.Restart(m); err != nil {
				return err
			}
			n.ev.Add(history.EventRestart, "restarted "+m.ID+" on its data dir")
			return nil
		},
		busy: []*harness.Node{m}, disturbed: 1,
	}
}

func (n *Nemesis) pauseLeader(ctx context.Context, _ int) (*active, error) {
	l, err := n.freeLeader(ctx)
	if err != nil {
		return nil, err
	}
	if err := n.cl.Pause(l); err != nil {
		return nil, err
	}
	d := n.between(1500*time.Millisecond, 3*time.Second) // well past the 400 ms election timeout
	n.ev.Add(evFault, fmt.Sprintf("SIGSTOP leader %s for %v", l.ID, d))
	return &active{
		hold: d,
		heal: func(context.Context) error {
			n.ev.Add(evHeal, "SIGCONT "+l.ID)
			return n.cl.Resume(l)
		},
		busy: []*harness.Node{l}, disturbed: 1,
	}, nil
}

// pauseClient stops a client that holds a lock for longer than its TTL, so
// that its lease expires and another client takes the lock: the writes it
// makes when it wakes up must be refused. Sometimes the resource restarts
// meanwhile, so the refusal must survive the restart.
func (n *Nemesis) pauseClient(ctx context.Context, _ int) (*active, error) {
	var who int
	var h workload.Holding
	ctx2, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	err := harness.Retry(ctx2, func() error {
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
		return nil, err
	}
	p := n.clients[who]
	if err := p.Pause(); err != nil {
		return nil, err
	}
	ttl := time.Duration(h.TTL) * time.Millisecond
	d := ttl + n.between(time.Second, 2*time.Second)
	n.ev.Add(evFault, fmt.Sprintf("SIGSTOP client %d holding %s t%d (ttl %v) for %v", who, h.Lock, h.Token, ttl, d))
	restart := n.rng.Float64() < n.cfg.PauseRestartsResource
	return &active{
		hold: d,
		heal: func(ctx context.Context) error {
			if restart {
				if err := n.bounceResource(ctx); err != nil {
					_ = p.Resume()
					return err
				}
			}
			n.ev.Add(evHeal, fmt.Sprintf("SIGCONT client %d", who))
			return p.Resume()
		},
	}, nil
}

// membership adds a member while there are only the initial ones, and
// otherwise removes one, a third of the time the leader.
func (n *Nemesis) membership(ctx context.Context, _ int) (*active, error) {
	members := n.cl.Members()
	if spares := n.cl.Spares(); len(members) <= n.cfg.Nodes && len(spares) > 0 {
		s, _ := n.pick(spares, "spare")
		if err := n.rejoin(s, false); err != nil {
			return nil, err
		}
		n.ev.Add(evFault, "add member "+s.ID)
		return &active{busy: []*harness.Node{s}, disturbed: 1}, nil
	}
	victim, err := n.pick(n.free(true), "member")
	if err != nil {
		return nil, err
	}
	if l, _, err := n.cl.Leader(ctx); err == nil && !n.busy(l) && !n.spared(l) && n.rng.IntN(3) == 0 {
		victim = l
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := n.cl.Remove(ctx, victim); err != nil {
		return nil, err
	}
	n.cl.Kill(victim)
	n.ev.Add(evFault, "removed member "+victim.ID)
	if err := n.cl.Wipe(victim); err != nil {
		return nil, err
	}
	return &active{busy: []*harness.Node{victim}, disturbed: 1}, nil
}

// replace removes a follower, wipes its disk and joins it again under the
// same id: a new incarnation, admitted because it was removed first.
func (n *Nemesis) replace(ctx context.Context, _ int) (*active, error) {
	v, err := n.killFollower(ctx)
	if err != nil {
		return nil, err
	}
	rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := n.cl.Remove(rctx, v); err != nil {
		return nil, err
	}
	if err := n.rejoin(v, false); err != nil {
		return nil, err
	}
	n.ev.Add(history.EventReplace, "replaced "+v.ID+": removed, wiped, joined again")
	return &active{busy: []*harness.Node{v}, disturbed: 1}, nil
}

// wipedRefused wipes a follower's disk and restarts it under its old id
// without removing it: the cluster must refuse it and the process must exit
// non-zero. Then it comes back properly, with --replace.
func (n *Nemesis) wipedRefused(ctx context.Context, _ int) (*active, error) {
	v, err := n.killFollower(ctx)
	if err != nil {
		return nil, err
	}
	if err := n.rejoin(v, false); err != nil {
		return nil, err
	}
	n.ev.Add(evFault, "restarted "+v.ID+" wiped, under its old id")
	if err := n.cl.ExpectRefusal(v, 60*time.Second); err != nil {
		n.cl.Kill(v)
		n.problem("wiped member: %v", err)
	} else {
		n.ev.Add(evRefused, v.ID+" refused and exited")
	}
	if err := n.rejoin(v, true); err != nil {
		return nil, err
	}
	n.ev.Add(history.EventReplace, "rejoined "+v.ID+" with --replace")
	return &active{busy: []*harness.Node{v}, disturbed: 1}, nil
}

// killFollower kills a follower that no active fault acts on, never the
// witness, and returns it.
func (n *Nemesis) killFollower(ctx context.Context) (*harness.Node, error) {
	l, err := n.leader(ctx)
	if err != nil {
		return nil, err
	}
	v, err := n.pick(n.free(true, l), "follower")
	if err != nil {
		return nil, err
	}
	n.cl.Kill(v)
	return v, nil
}

// rejoin wipes m's data dir and starts it joining the cluster again, with
// --replace if replace is set.
func (n *Nemesis) rejoin(m *harness.Node, replace bool) error {
	if err := n.cl.Wipe(m); err != nil {
		return err
	}
	return n.cl.Join(m, replace)
}

// killAll kills every member (but the witness, in a soak) and restarts
// them together.
func (n *Nemesis) killAll(context.Context, int) (*active, error) {
	var victims []*harness.Node
	for _, m := range n.cl.Members() {
		if !n.spared(m) {
			victims = append(victims, m)
		}
	}
	for _, m := range victims {
		n.cl.Kill(m)
	}
	n.ev.Add(evFault, "SIGKILL every member: "+ids(victims))
	return &active{
		hold: n.between(500*time.Millisecond, 1500*time.Millisecond),
		heal: func(context.Context) error {
			for _, m := range victims {
				if err := n.cl.Restart(m); err != nil {
					return err
				}
			}
			n.ev.Add(history.EventRestart, "restarted every member")
			return nil
		},
		busy: victims, disturbed: len(victims),
	}, nil
}

func (n *Nemesis) restartResource(context.Context, int) (*active, error) {
	n.rs.Kill()
	n.ev.Add(evFault, "SIGKILL resource")
	return &active{
		hold: n.between(100*time.Millisecond, time.Second),
		heal: n.startResource,
	}, nil
}

// bounceResource kills the resource and starts it again at once.
func (n *Nemesis) bounceResource(ctx context.Context) error {
	n.rs.Kill()
	n.ev.Add(evFault, "SIGKILL resource")
	n.hold(ctx, n.between(100*time.Millisecond, time.Second))
	return n.startResource(ctx)
}

func (n *Nemesis) startResource(ctx context.Context) error {
	if err := harness.Within(ctx, 30*time.Second, n.rs.Start); err != nil {
		return err
	}
	n.ev.Add(history.EventKind("resource-restart"), "resource restarted on its data dir")
	return nil
}
