package netfault

import (
	"errors"
	"fmt"
	"sync"
	"time"
)

// Net is a full mesh of Links between a set of nodes: for every ordered pair
// (from, to) there is one Link that from dials to reach to. Methods taking
// node ids panic on an id the Net does not know, because in a chaos test
// that is a typo, not a condition to handle.
type Net struct {
	mu      sync.Mutex
	targets map[string]string           // node id → real raft address
	links   map[string]map[string]*Link // from → to → link
}

// NewNet builds the mesh for targets, which maps node id to the node's real
// Raft address.
func NewNet(targets map[string]string) (*Net, error) {
	n := &Net{
		targets: make(map[string]string, len(targets)),
		links:   make(map[string]map[string]*Link, len(targets)),
	}
	for id, addr := range targets {
		if err := n.AddNode(id, addr); err != nil {
			return nil, errors.Join(err, n.Close())
		}
	}
	return n, nil
}

// AddNode adds a node and the links between it and every existing node, in
// both directions. Adding an id that already exists is an error; after any
// other error the Net is partly built and should be closed.
func (n *Net) AddNode(id, addr string) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if _, ok := n.targets[id]; ok {
		return fmt.Errorf("netfault: node %s already exists", id)
	}
	n.links[id] = make(map[string]*Link)
	n.targets[id] = addr
	for peer, peerAddr := range n.targets {
		if peer == id {
			continue
		}
		out, err := NewLink(id+"->"+peer, peerAddr)
		if err != nil {
			return err
		}
		n.links[id][peer] = out
		in, err := NewLink(peer+"->"+id, addr)
		if err != nil {
			return err
		}
		n.links[peer][id] = in
	}
	return nil
}

// SetTarget points every link into id at addr, for a node that restarted
// on a new port. Open connections keep their old target.
func (n *Net) SetTarget(id, addr string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.mustKnow(id)
	n.targets[id] = addr
	for from, out := range n.links {
		if from != id {
			out[id].SetTarget(addr)
		}
	}
}

// Link returns the link node from dials to reach node to, for faults the
// Net helpers do not cover.
func (n *Net) Link(from, to string) *Link {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.link(from, to)
}

// Addr returns the proxy address node from must dial to reach node to.
func (n *Net) Addr(from, to string) string {
	return n.Link(from, to).Addr()
}

// PeerAddrs returns, for node self, every peer id mapped to the proxy
// address self must dial to reach it: what self's ServerAddressProvider
// should answer.
func (n *Net) PeerAddrs(self string) map[string]string {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.mustKnow(self)
	addrs := make(map[string]string, len(n.links[self]))
	for peer, l := range n.links[self] {
		addrs[peer] = l.Addr()
	}
	return addrs
}

// Isolate cuts every link into and out of id.
func (n *Net) Isolate(id string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.mustKnow(id)
	for peer := range n.links[id] {
		n.links[id][peer].Cut()
		n.links[peer][id].Cut()
	}
}

// Partition cuts every link between a node of groupA and a node of groupB,
// both ways. Links within a group are left alone.
func (n *Net) Partition(groupA, groupB []string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, a := range groupA {
		for _, b := range groupB {
			if a == b {
				continue
			}
			n.link(a, b).Cut()
			n.link(b, a).Cut()
		}
	}
}

// CutOneWay silently drops everything node from sends to node to, while
// everything to sends to from still arrives. That takes two links: on
// from→to, from's requests are dropped (Forward); on to→from, from's
// replies to to's requests are dropped (Backward). Neither node's RPCs to
// the other complete, yet from still hears every request to makes (a
// vote request, say), which is the asymmetric partition Raft must survive.
func (n *Net) CutOneWay(from, to string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.link(from, to).CutOneWay(Forward)
	n.link(to, from).CutOneWay(Backward)
}

// HealAll heals every link, clearing cuts and delays.
func (n *Net) HealAll() {
	n.each(func(l *Link) { l.Heal() })
}

// DelayAll sets the same delay on every link; DelayAll(0) removes it.
func (n *Net) DelayAll(d time.Duration) {
	n.each(func(l *Link) { l.Delay(d) })
}

// Close closes every link.
func (n *Net) Close() error {
	var errs []error
	n.each(func(l *Link) { errs = append(errs, l.Close()) })
	return errors.Join(errs...)
}

func (n *Net) each(fn func(*Link)) {
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, out := range n.links {
		for _, l := range out {
			fn(l)
		}
	}
}

// link returns the from→to link; the caller holds n.mu.
func (n *Net) link(from, to string) *Link {
	n.mustKnow(from)
	n.mustKnow(to)
	l, ok := n.links[from][to]
	if !ok {
		panic(fmt.Sprintf("netfault: no link from %s to itself", from))
	}
	return l
}

// mustKnow panics if id is not a node of the Net; the caller holds n.mu.
func (n *Net) mustKnow(id string) {
	if _, ok := n.targets[id]; !ok {
		panic(fmt.Sprintf("netfault: unknown node %q", id))
	}
}
