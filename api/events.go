package api

import (
	"net/http"
	"strings"

	"github.com/fencer-io/fencer/api/internal/request"
	"github.com/fencer-io/fencer/api/internal/sse"
	"github.com/fencer-io/fencer/fsm/event"
	"github.com/fencer-io/fencer/internal/acl"
)

// events streams this node's events as Server-Sent Events (api/internal/sse):
// every event after ?since= (or Last-Event-ID, which wins), in log order,
// then live; without either, from the node's applied index. Any node
// answers from its own applied state, so it is never forwarded. A reader
// that falls more than its buffer behind gets a final `lagged` event naming
// the last index it was sent, and the stream ends.
func (s *Server) events(w http.ResponseWriter, r *http.Request) {
	since, err := request.WatchSince(r)
	if err != nil {
		writeErr(w, err)
		return
	}
	watcher, err := s.co.Watch(since)
	if err != nil {
		writeErr(w, err)
		return
	}
	defer watcher.Close()
	sse.Stream(r.Context(), w, watcher, visibleEvents(r), s.keepAlive)
}

// visibleEvents says which events the request's stream shows: those under
// its ?prefix= that its principal may read (events of neither a lock nor a
// key, such as a member's, only without a prefix, to those who may read
// status).
func visibleEvents(r *http.Request) func(e *event.Event) bool {
	prefix := r.URL.Query().Get("prefix")
	p, authenticated := acl.PrincipalFrom(r.Context())
	return func(e *event.Event) bool {
		switch {
		case e.Lock != "":
			return strings.HasPrefix(e.Lock, prefix) && (!authenticated || acl.Allow(p, acl.ActionReadLock, e.Lock))
		case e.Key != "":
			return strings.HasPrefix(e.Key, prefix) && (!authenticated || acl.Allow(p, acl.ActionReadKey, e.Key))
		case e.Semaphore != "":
			// Semaphores follow a token's lock prefixes.
			return strings.HasPrefix(e.Semaphore, prefix) && (!authenticated || acl.Allow(p, acl.ActionReadLock, e.Semaphore))
		}
		return prefix == "" && (!authenticated || acl.Allow(p, acl.ActionStatus, ""))
	}
}
