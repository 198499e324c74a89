package nemesis

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/fencer-io/fencer/test/chaos/harness"
)

// The network faults. Each cuts what the same fault would cut in a real
// network: a partition separates nodes over Raft and HTTP alike, and
// clients end up on one side or the other; the narrower cuts (one way,
// HTTP only, one client) are the gray failures between. Healing any of
// them heals every link, which is why they share one lever.

// healNetwork is the heal of every network fault.
func (n *Nemesis) healNetwork(context.Context) error {
	n.cl.HealNetwork()
	n.ev.Add(evHeal, "heal network")
	return nil
}

// isolateLeader cuts the leader off from every other member, and every
// client off from it but a few that end up on its side: those can reach
// only the deposed leader, the rest only the majority.
func (n *Nemesis) isolateLeader(ctx context.Context, _ int) (*active, error) {
	l, err := n.freeLeader(ctx)
	if err != nil {
		return nil, err
	}
	with, without := n.sideClients(0.25)
	sideA := append([]string{l.ID}, with...)
	sideB := without
	for _, m := range n.cl.Members() {
		if m != l {
			sideB = append(sideB, m.ID)
		}
	}
	n.cl.Partition(sideA, sideB)
	d := n.between(1500*time.Millisecond, 4*time.Second)
	n.ev.Add(evFault, fmt.Sprintf("isolate leader %s (with clients {%s}) for %v", l.ID, strings.Join(with, ","), d))
	return &active{hold: d, heal: n.healNetwork, busy: []*harness.Node{l}, disturbed: 1}, nil
}

// split partitions the members into a minority of up to budget members
// that no other fault acts on, and the rest; each client lands on one side.
func (n *Nemesis) split(_ context.Context, budget int) (*active, error) {
	members := n.cl.Members()
	k := 1 + n.rng.IntN(max(1, min(budget, (len(members)-1)/2)))
	free := n.free(false)
	if len(free) < k {
		return nil, fmt.Errorf("%d members free for a minority of %d", len(free), k)
	}
	n.rng.Shuffle(len(free), func(i, j int) { free[i], free[j] = free[j], free[i] })
	minority := free[:k]
	var majority []*harness.Node
	for _, m := range members {
		if !slices.Contains(minority, m) {
			majority = append(majority, m)
		}
	}
	with, without := n.sideClients(float64(k) / float64(len(members)))
	sideA, sideB := with, without
	for _, m := range minority {
		sideA = append(sideA, m.ID)
	}
	for _, m := range majority {
		sideB = append(sideB, m.ID)
	}
	n.cl.Partition(sideA, sideB)
	d := n.between(1500*time.Millisecond, 4*time.Second)
	n.ev.Add(evFault, fmt.Sprintf("partition {%s + clients %s} | {%s + clients %s} for %v",
		ids(minority), strings.Join(with, ","), ids(majority), strings.Join(without, ","), d))
	return &active{hold: d, heal: n.healNetwork, busy: minority, disturbed: k}, nil
}

// sideClients deals each client to side A with probability p, else to B.
func (n *Nemesis) sideClients(p float64) (a, b []string) {
	for _, c := range n.clientNames() {
		if n.rng.Float64() < p {
			a = append(a, c)
		} else {
			b = append(b, c)
		}
	}
	return a, b
}

// oneWay silently drops everything one of the leader and a follower sends
// the other over Raft.
func (n *Nemesis) oneWay(ctx context.Context, _ int) (*active, error) {
	l, err := n.freeLeader(ctx)
	if err != nil {
		return nil, err
	}
	f, err := n.pick(n.free(false, l), "follower")
	if err != nil {
		return nil, err
	}
	from, to := l.ID, f.ID
	if n.rng.IntN(2) == 0 {
		from, to = to, from
	}
	n.cl.Net().CutOneWay(from, to)
	d := n.between(1500*time.Millisecond, 4*time.Second)
	n.ev.Add(evFault, fmt.Sprintf("drop every raft message %s sends to %s for %v", from, to, d))
	// The follower is the one the pair may lose; the leader stays free, so
	// that a stacked fault may still kill or pause it (within the budget).
	return &active{hold: d, heal: n.healNetwork, busy: []*harness.Node{f}, disturbed: 1}, nil
}

func (n *Nemesis) delay(context.Context, int) (*active, error) {
	lat := n.between(5*time.Millisecond, 60*time.Millisecond)
	n.cl.DelayNetwork(lat)
	d := n.between(2*time.Second, 4*time.Second)
	n.ev.Add(evFault, fmt.Sprintf("delay every raft and http link by %v for %v", lat, d))
	return &active{hold: d, heal: n.healNetwork}, nil
}

// clientCut cuts some clients off the leader's HTTP API, and nothing else:
// they can still reach the followers, which forward to the leader.
func (n *Nemesis) clientCut(ctx context.Context, _ int) (*active, error) {
	l, err := n.freeLeader(ctx)
	if err != nil {
		return nil, err
	}
	names := n.clientNames()
	cut := names[:1+n.rng.IntN(len(names))]
	silent := n.rng.IntN(3) == 0
	for _, c := range cut {
		n.cl.CutHTTP(c, l.ID, silent)
	}
	d := n.between(2*time.Second, 5*time.Second)
	n.ev.Add(evFault, fmt.Sprintf("cut clients %s off leader %s over http (%s) for %v; the followers stay reachable",
		strings.Join(cut, ","), l.ID, howCut(silent), d))
	return &active{hold: d, heal: n.healNetwork}, nil
}

// httpCut cuts some followers' HTTP to the leader while their Raft links
// stay up: they follow the leader but cannot forward to it.
func (n *Nemesis) httpCut(ctx context.Context, _ int) (*active, error) {
	l, err := n.freeLeader(ctx)
	if err != nil {
		return nil, err
	}
	followers := n.free(false, l)
	if len(followers) == 0 {
		return nil, fmt.Errorf("no follower free to cut")
	}
	n.rng.Shuffle(len(followers), func(i, j int) { followers[i], followers[j] = followers[j], followers[i] })
	cut := followers[:1+n.rng.IntN(len(followers))]
	silent := n.rng.IntN(3) == 0
	for _, f := range cut {
		n.cl.CutHTTP(f.ID, l.ID, silent)
	}
	d := n.between(2*time.Second, 5*time.Second)
	n.ev.Add(evFault, fmt.Sprintf("cut http from followers %s to leader %s (%s) for %v; raft untouched",
		ids(cut), l.ID, howCut(silent), d))
	// The cut followers keep the quorum, but a stacked fault must not pick
	// them: a wiped one could not hear its refusal, which comes over HTTP.
	return &active{hold: d, heal: n.healNetwork, busy: cut}, nil
}

func howCut(silent bool) string {
	if silent {
		return "requests silently dropped"
	}
	return "connections reset"
}
