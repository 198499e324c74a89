package cluster

import (
	"context"
	"sync"
	"time"

	"github.com/fencer-io/fencer/api/wire"
)

// memberStatusTimeout bounds how long MemberStatuses waits for a member: an
// unreachable one is reported as such rather than holding up the others.
const memberStatusTimeout = time.Second

// MemberStatuses asks every member for its own view (state, term, commit
// and applied index, last contact), in parallel, and answers for itself
// without a request. It is what a page served by one node shows of the
// others, which the browser cannot ask itself (they are other origins).
// The members are asked with this node's credential (its certificate or
// the cluster secret), which may read status.
func (n *Node) MemberStatuses(ctx context.Context) (wire.MemberStatusList, error) {
	st, err := n.Status()
	if err != nil {
		return wire.MemberStatusList{}, err
	}
	out := wire.MemberStatusList{Node: n.cfg.ID, Members: make([]wire.MemberStatus, len(st.Members))}
	var addrs []string
	for _, m := range st.Members {
		if m.HTTPAddr != "" {
			addrs = append(addrs, m.HTTPAddr)
		}
	}
	c, cerr := n.peerClient(addrs, memberStatusTimeout, 1)
	ctx, cancel := context.WithTimeout(ctx, memberStatusTimeout)
	defer cancel()
	var wg sync.WaitGroup
	for i, m := range st.Members {
		ms := &out.Members[i]
		ms.Member = m
		switch {
		case m.ID == n.cfg.ID:
			ms.Fill(st)
		case m.HTTPAddr == "":
			ms.State, ms.Error = "unknown", "its HTTP address is not recorded yet"
		case cerr != nil:
			ms.State, ms.Error = "unreachable", cerr.Error()
		default:
			wg.Add(1)
			go func() {
				defer wg.Done()
				self, err := c.MemberStatus(ctx, m.HTTPAddr)
				if err != nil {
					ms.State, ms.Error = "unreachable", err.Error()
					return
				}
				ms.Fill(self)
			}()
		}
	}
	wg.Wait()
	return out, nil
}
