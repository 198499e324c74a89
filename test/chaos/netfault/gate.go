package netfault

import (
	"errors"
	"fmt"
	"maps"
	"net"
	"sync"
	"time"
)

// Identify names the process that dialed conn (a source of an HTTPMesh),
// or reports false when it cannot tell.
type Identify func(conn net.Conn) (source string, ok bool)

// Gate stands at the one address everybody is told to dial to reach a node
// (the HTTP address the node advertises). The address cannot say who is
// calling, so the Gate asks Identify and hands each connection to that
// source's Link into the node; a connection it cannot attribute goes
// through a Link that is never faulted, and is counted.
type Gate struct {
	name     string
	listener net.Listener
	identify Identify
	open     *Link
	wg       sync.WaitGroup

	mu     sync.Mutex
	links  map[string]*Link // source → its link into the node
	counts map[string]int64 // connections by source; "" for unattributed
}

// NewGate listens on 127.0.0.1:0 for connections to target, the API of the
// node named name.
func NewGate(name, target string, identify Identify) (*Gate, error) {
	open, err := NewLink(name+"(unattributed)", target)
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, errors.Join(fmt.Errorf("netfault: gate %s: %w", name, err), open.Close())
	}
	g := &Gate{name: name, listener: ln, identify: identify, open: open,
		links: map[string]*Link{}, counts: map[string]int64{}}
	g.wg.Add(1)
	go g.acceptLoop()
	return g, nil
}

// Addr is the address the node advertises.
func (g *Gate) Addr() string { return g.listener.Addr().String() }

// Route sends the connections attributed to source through l.
func (g *Gate) Route(source string, l *Link) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.links[source] = l
}

// Counts returns how many connections came from each source (the node
// itself included), and under "" how many could not be attributed.
func (g *Gate) Counts() map[string]int64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	return maps.Clone(g.counts)
}

// Close stops accepting and closes the unattributed link; routed links
// belong to the caller.
func (g *Gate) Close() error {
	err := g.listener.Close()
	g.wg.Wait()
	return errors.Join(err, g.open.Close())
}

func (g *Gate) acceptLoop() {
	defer g.wg.Done()
	for {
		conn, err := g.listener.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			time.Sleep(10 * time.Millisecond) // EMFILE and the like: back off, do not spin
			continue
		}
		// Identifying reads /proc: a few milliseconds, so not in this loop.
		g.wg.Add(1)
		go func() {
			defer g.wg.Done()
			g.route(conn).Serve(conn)
		}()
	}
}

// route picks the link for conn. A node dialing its own gate (a leader
// not yet ready joins through the leader's address) has no link to cut,
// and goes through unfaulted as its own.
func (g *Gate) route(conn net.Conn) *Link {
	source, ok := g.identify(conn)
	g.mu.Lock()
	defer g.mu.Unlock()
	switch l := g.links[source]; {
	case ok && l != nil:
		g.counts[source]++
		return l
	case ok && source == g.name:
		g.counts[source]++
	default:
		g.counts[""]++
	}
	return g.open
}

// HTTPMesh is the HTTP side of a cluster. Every node has a Gate at the
// address it advertises, and every source (a node or a client) has a Link
// into every other node. A source's connection reaches its Link either
// through the node's Gate, which attributes it, or at the Link's own
// address, which a client can be given as an endpoint. So the harness can
// cut one source off one node, whichever address the source dialed: the
// one it was given, or the one the cluster told it.
//
// Methods taking ids panic on an id the mesh does not know, as Net's do.
type HTTPMesh struct {
	mu      sync.Mutex
	nodes   map[string]bool
	sources map[string]bool
	gates   map[string]*Gate
	links   map[string]map[string]*Link // source → node → link
}

// NewHTTPMesh builds the mesh: targets maps each node id to the address its
// API really listens on, sources names every process that dials nodes
// (node ids among them), and identify tells a Gate who dialed.
func NewHTTPMesh(targets map[string]string, sources []string, identify Identify) (*HTTPMesh, error) {
	m := &HTTPMesh{nodes: map[string]bool{}, sources: map[string]bool{},
		gates: map[string]*Gate{}, links: map[string]map[string]*Link{}}
	for _, s := range sources {
		m.sources[s] = true
		m.links[s] = map[string]*Link{}
	}
	for node, target := range targets {
		m.nodes[node] = true
		g, err := NewGate(node, target, identify)
		if err != nil {
			return nil, errors.Join(err, m.Close())
		}
		m.gates[node] = g
		for _, s := range sources {
			if s == node {
				continue
			}
			l, err := NewLink(s+"->"+node+"(http)", target)
			if err != nil {
				return nil, errors.Join(err, m.Close())
			}
			m.links[s][node] = l
			g.Route(s, l)
		}
	}
	return m, nil
}

// GateAddr is the address node advertises: everybody's way in.
func (m *HTTPMesh) GateAddr(node string) string {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.mustKnow(node, m.nodes)
	return m.gates[node].Addr()
}

// Addr is source's own address for node, for a client's endpoint list.
func (m *HTTPMesh) Addr(source, node string) string { return m.Link(source, node).Addr() }

// Link returns the link from source into node.
func (m *HTTPMesh) Link(source, node string) *Link {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.link(source, node)
}

// Cut resets source's connections into node and refuses new ones.
func (m *HTTPMesh) Cut(source, node string) { m.Link(source, node).Cut() }

// CutOneWay silently drops source's requests to node (Forward) or node's
// answers (Backward): the caller hangs until its own timeout.
func (m *HTTPMesh) CutOneWay(source, node string, dir Direction) {
	m.Link(source, node).CutOneWay(dir)
}

// HealAll heals every link, clearing cuts and delays.
func (m *HTTPMesh) HealAll() { m.each(func(l *Link) { l.Heal() }) }

// DelayAll delays every link by d; DelayAll(0) removes it.
func (m *HTTPMesh) DelayAll(d time.Duration) { m.each(func(l *Link) { l.Delay(d) }) }

// Counts sums the gates' Counts by source.
func (m *HTTPMesh) Counts() map[string]int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	sum := map[string]int64{}
	for _, g := range m.gates {
		for source, k := range g.Counts() {
			sum[source] += k
		}
	}
	return sum
}

// Stats sums every link's Stats (Active included).
func (m *HTTPMesh) Stats() Stats {
	var sum Stats
	m.each(func(l *Link) {
		s := l.Stats()
		sum.Accepted += s.Accepted
		sum.Rejected += s.Rejected
		sum.DialErrors += s.DialErrors
		sum.Active += s.Active
		for d := range 2 {
			sum.Bytes[d] += s.Bytes[d]
			sum.Dropped[d] += s.Dropped[d]
		}
	})
	return sum
}

// Close closes every gate and link.
func (m *HTTPMesh) Close() error {
	m.mu.Lock()
	gates := m.gates
	m.mu.Unlock()
	var errs []error
	for _, g := range gates {
		errs = append(errs, g.Close())
	}
	m.each(func(l *Link) { errs = append(errs, l.Close()) })
	return errors.Join(errs...)
}

func (m *HTTPMesh) each(fn func(*Link)) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, out := range m.links {
		for _, l := range out {
			fn(l)
		}
	}
}

// link returns source's link into node; the caller holds m.mu.
func (m *HTTPMesh) link(source, node string) *Link {
	m.mustKnow(source, m.sources)
	m.mustKnow(node, m.nodes)
	l, ok := m.links[source][node]
	if !ok {
		panic(fmt.Sprintf("netfault: no http link from %s to itself", source))
	}
	return l
}

func (m *HTTPMesh) mustKnow(id string, set map[string]bool) {
	if !set[id] {
		panic(fmt.Sprintf("netfault: unknown http endpoint %q", id))
	}
}
