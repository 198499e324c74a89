package harness

import (
	"time"

	"github.com/fencer-io/fencer/test/chaos/netfault"
)

// Partition splits the network into sides as a real one would split:
// between nodes on different sides every Raft link and every HTTP link
// (forwarding, joins) is cut, both ways, and a client reaches only the
// nodes on its side. Names are node ids and ClientName(i); anything on no
// side keeps all its links.
func (c *Cluster) Partition(sides ...[]string) {
	side := map[string]int{}
	for i, names := range sides {
		for _, name := range names {
			side[name] = i
		}
	}
	for a, sa := range side {
		for b, sb := range side {
			if sa == sb || c.Node(b) == nil {
				continue // a client is only ever dialed from, never dials to
			}
			if c.Node(a) != nil {
				c.net.Link(a, b).Cut()
			}
			c.http.Cut(a, b)
		}
	}
}

// CutHTTP cuts source's HTTP link into node (source a node id or a
// ClientName), leaving Raft alone: silent drops its requests without a
// word, so that the caller waits for its own timeout; otherwise
// connections are reset.
func (c *Cluster) CutHTTP(source, node string, silent bool) {
	if silent {
		c.http.CutOneWay(source, node, netfault.Forward)
		return
	}
	c.http.Cut(source, node)
}

// DelayNetwork delays every Raft and HTTP link by d.
func (c *Cluster) DelayNetwork(d time.Duration) {
	c.net.DelayAll(d)
	c.http.DelayAll(d)
}

// HealNetwork heals every Raft and HTTP link.
func (c *Cluster) HealNetwork() {
	c.net.HealAll()
	c.http.HealAll()
}
