package acl

import (
	"net/http"
	"sync"
	"time"

	"github.com/fencer-io/fencer/api/wire"
)

// replays remembers the member signatures of the requests that change
// something (all but GET and HEAD) for as long as a signature is valid, and
// refuses one seen before. A signature covers its member, the node, the
// method, the URI and the time, not the body: without this, one seen on the
// wire (a plaintext cluster) could be sent again within the window with
// another body, a join recording the sender's key for that member among them
// (a review took a member over so). Signatures are bound to the node they
// were made for, so each node's own memory suffices.
type replays struct {
	mu   sync.Mutex
	seen map[string]time.Time
}

// first reports whether a change signed sig reaches this node for the
// first time, and remembers it.
func (p *replays) first(r *http.Request, sig string, now time.Time) bool {
	if r.Method == http.MethodGet || r.Method == http.MethodHead {
		return true
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.seen == nil {
		p.seen = map[string]time.Time{}
	}
	if at, ok := p.seen[sig]; ok && now.Sub(at) <= 2*wire.MemberSignatureSkew {
		return false
	}
	if len(p.seen) >= 1024 {
		for s, at := range p.seen {
			if now.Sub(at) > 2*wire.MemberSignatureSkew {
				delete(p.seen, s)
			}
		}
	}
	p.seen[sig] = now
	return true
}
