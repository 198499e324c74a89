package api

import (
	"net/http"
	"strings"

	"github.com/fencer-io/fencer/api/internal/request"
	"github.com/fencer-io/fencer/api/internal/sse"
	"github.com/fencer-io/fencer/api/wire"
	"github.com/fencer-io/fencer/fsm/event"
	"github.com/fencer-io/fencer/internal/acl"
)

// events streams this node's events as Server-Sent Events (api/internal/sse):
// every event after ?since= (or Last-Event-ID, which wins), in log order,
// then live; without either, from the node's applied index. Any node
// answers from its own applied state, so it is never forwarded. A reader
// that falls more than the history's lag bound behind gets a final `lagged`
// event naming the index to resume from, and the stream ends; one that
// stops reading is closed after the write timeout. Past the node's or the
// client's limit on open streams it is 429 too_many_watches.
func (s *Server) events(w http.ResponseWriter, r *http.Request) {
	since, err := request.WatchSince(r)
	if err != nil {
		writeErr(w, err)
		return
	}
	release, err := s.streams.Take(w, r)
	if err != nil {
		writeErr(w, err)
		return
	}
	defer release()
	watcher, err := s.co.Watch(since)
	if err != nil {
		writeErr(w, err)
		return
	}
	sse.Stream(r.Context(), w, watcher, eventScope(r), sse.Config{KeepAlive: s.keepAlive, WriteTimeout: s.watch.WriteTimeout})
}

// eventScope says which events the request's stream shows, asked again at
// every ACL reload: those under its ?prefix= that its principal, as the ACL
// in force has it, may read. A token removed from the ACL ends its stream.
func eventScope(r *http.Request) sse.Scope {
	prefix := r.URL.Query().Get("prefix")
	sess := acl.SessionFrom(r.Context())
	return func() (func(e *event.Event) bool, <-chan struct{}) {
		changed := sess.Changed()
		p, err := sess.Principal()
		if err != nil || sess != nil && !acl.Allow(p, acl.ActionReadLock, "") {
			return nil, changed
		}
		return visibleEvents(prefix, p), changed
	}
}

// visibleEvents says which events a stream shows: those under prefix that
// p may read, all without an ACL (p nil). Events of neither a lock nor a
// key, such as a member's, show only without a prefix, to those who may
// read status. A session's events show as a lock's would, by its holder.
func visibleEvents(prefix string, p *acl.Principal) func(e *event.Event) bool {
	open := p == nil
	return func(e *event.Event) bool {
		switch {
		case e.Lock != "":
			return strings.HasPrefix(e.Lock, prefix) && (open || acl.Allow(p, acl.ActionReadLock, e.Lock))
		case e.Key != "":
			return strings.HasPrefix(e.Key, prefix) && (open || acl.Allow(p, acl.ActionReadKey, e.Key))
		case e.Semaphore != "":
			// Semaphores follow a token's lock prefixes.
			return strings.HasPrefix(e.Semaphore, prefix) && (open || acl.Allow(p, acl.ActionReadLock, e.Semaphore))
		case e.Session != 0:
			// A session's own event: its holder's name is read as a
			// lock's (acl.SessionAllowed).
			return strings.HasPrefix(e.Holder, prefix) && (open || acl.Allow(p, acl.ActionReadLock, e.Holder))
		}
		return prefix == "" && (open || acl.Allow(p, acl.ActionStatus, ""))
	}
}

// reauthorize checks a request that waited (a blocking read) against the
// ACL in force now: 401 once its token was removed, 403 once it may no
// longer do action on resource. Without an ACL it allows everything.
func reauthorize(w http.ResponseWriter, sess *acl.Session, action acl.Action, resource string) error {
	p, err := sess.Principal()
	switch {
	case err != nil:
		w.Header().Set("WWW-Authenticate", `Bearer realm="fencer", error="invalid_token"`)
		return &wire.Error{Code: wire.CodeUnauthorized, Message: "the ACL was reloaded while this request waited: " + err.Error()}
	case sess != nil && !acl.Allow(p, action, resource):
		return &wire.Error{Code: wire.CodeForbidden, Message: "the ACL was reloaded while this request waited: token " + p.Name + " (" + string(p.Role) + ") may no longer " + string(action) + " " + resource}
	}
	return nil
}
