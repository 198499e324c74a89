package nemesis

import (
	"context"
	"fmt"
	"time"

	"github.com/fencer-io/fencer/test/chaos/harness"
	"github.com/fencer-io/fencer/test/chaos/history"
)

// The disk faults: a member's log store stalls or fails (test/diskfault,
// in the suite's build of fencer). A leader whose writes stall must hand
// leadership over and exit within the stall timeout; a member whose writes
// fail must exit; both come back on their data dirs once the disk is
// healed, and catch up.

// exitWithin bounds how long a member whose disk stalled (as leader) or
// failed may take to exit: the stall timeout, a write to notice it (the
// clients write all the time), and fencer's 5s of trying to stop cleanly.
const exitWithin = harness.StallTimeout + 10*time.Second

// diskStall stalls the disk of the leader, or sometimes of a follower,
// which only falls behind while it lasts.
func (n *Nemesis) diskStall(ctx context.Context, _ int) (*active, error) {
	m, leader, err := n.diskVictim(ctx, 0.7)
	if err != nil {
		return nil, err
	}
	if err := n.cl.SetDisk(m, harness.DiskStall); err != nil {
		return nil, err
	}
	what := "follower"
	if leader {
		what = "leader"
	}
	n.ev.Add(evFault, fmt.Sprintf("stalled the disk of %s %s", what, m.ID))
	return n.diskActive(m, leader, n.between(harness.StallTimeout+time.Second, harness.StallTimeout+3*time.Second)), nil
}

// diskFull makes a member's disk fail writes with ENOSPC.
func (n *Nemesis) diskFull(ctx context.Context, _ int) (*active, error) {
	m, leader, err := n.diskVictim(ctx, 0.5)
	if err != nil {
		return nil, err
	}
	if err := n.cl.SetDisk(m, harness.DiskFull); err != nil {
		return nil, err
	}
	n.ev.Add(evFault, fmt.Sprintf("filled the disk of %s (leader: %v)", m.ID, leader))
	return n.diskActive(m, true, n.between(time.Second, 3*time.Second)), nil
}

// diskVictim picks the free leader with probability pLeader, else a free
// member; never the witness, whose process must live the whole run.
func (n *Nemesis) diskVictim(ctx context.Context, pLeader float64) (m *harness.Node, leader bool, err error) {
	l, err := n.leader(ctx)
	if err != nil {
		return nil, false, err
	}
	if n.rng.Float64() < pLeader && !n.busy(l) && !n.spared(l) {
		return l, true, nil
	}
	m, err = n.pick(n.free(true, l), "follower")
	return m, false, err
}

// diskActive holds a disk fault on m. mustExit: m must have exited by the
// heal (a stalled leader, a failing disk); else (a stalled follower) it
// must still run. The heal makes the disk healthy and restarts m if it
// exited.
func (n *Nemesis) diskActive(m *harness.Node, mustExit bool, hold time.Duration) *active {
	injected := time.Now()
	return &active{
		hold: hold,
		heal: func(context.Context) error {
			if mustExit && !n.cl.WaitExit(m, time.Until(injected.Add(exitWithin))) {
				n.problem("%s was still running %v after its disk failed or stalled", m.ID, time.Since(injected).Round(time.Millisecond))
			}
			if err := n.cl.SetDisk(m, harness.DiskHealthy); err != nil {
				return err
			}
			if m.Running() {
				n.ev.Add(evHeal, "healed the disk of "+m.ID)
				return nil
			}
			n.ev.Add(evHeal, fmt.Sprintf("healed the disk of %s, which exited as designed", m.ID))
			if err := n.cl.Restart(m); err != nil {
				return err
			}
			n.ev.Add(history.EventRestart, "restarted "+m.ID+" on its data dir")
			return nil
		},
		busy: []*harness.Node{m}, disturbed: 1,
	}
}
