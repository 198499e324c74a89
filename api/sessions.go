package api

import (
	"net/http"
	"strconv"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/fencer-io/fencer/api/forward"
	"github.com/fencer-io/fencer/api/internal/request"
	"github.com/fencer-io/fencer/api/wire"
	"github.com/fencer-io/fencer/coord"
	"github.com/fencer-io/fencer/fsm"
	"github.com/fencer-io/fencer/internal/acl"
)

// Sessions (api/wire/sessions.go): one lease for many grants. Every route
// is the leader's (reads are linearizable unless stale, as locks'). The
// ACL checks the role at the edge and the session's holder against the
// principal's lock prefixes here, the one place that knows it.
func (s *Server) sessionRoutes() chi.Router {
	r := chi.NewRouter()
	r.Group(func(r chi.Router) {
		r.Use(s.fwd.LeaderOnly)
		r.Post("/", handleJSON(s.createSession))
		r.Get("/", handleJSON(s.listSessions))
		r.Get("/{id}", handleJSON(s.getSession))
		r.Post("/{id}/renew", handleJSON(s.renewSession))
		r.Post("/{id}/close", handleJSON(s.closeSession))
		r.Post("/{id}/revoke", handleJSON(s.revokeSession))
	})
	return r
}

func (s *Server) createSession(w http.ResponseWriter, r *http.Request) (any, error) {
	req, err := request.SessionBody(w, r)
	if err != nil {
		return nil, err
	}
	if !acl.SessionAllowed(r.Context(), acl.ActionAcquire, req.Holder) {
		return nil, sessionForbidden(r, acl.ActionAcquire, req.Holder)
	}
	ctx, cancel := s.work(r, 0)
	defer cancel()
	res, err := s.co.CreateSession(ctx, coord.SessionRequest{
		Holder:    req.Holder,
		TTL:       time.Duration(req.TTLMillis) * time.Millisecond,
		LockDelay: time.Duration(req.LockDelayMillis) * time.Millisecond,
		RequestID: req.RequestID,
		Principal: principalName(r),
	})
	if err != nil {
		return nil, err
	}
	ss := res.Session
	return wire.Session{Session: ss.ID, Holder: ss.Holder, Lease: ss.Lease, TTLMillis: ss.TTLMillis,
		LockDelayMillis: ss.LockDelayMillis, RequestID: ss.RequestID, Existing: res.Existing}, nil
}

// sessionID reads the {id} of a session route.
func sessionID(r *http.Request) (uint64, error) {
	id, err := strconv.ParseUint(chi.URLParam(r, "id"), 10, 64)
	if err != nil || id == 0 {
		return 0, &wire.Error{Code: wire.CodeInvalidToken, Message: "session id: want the number returned by POST /v1/sessions"}
	}
	return id, nil
}

// sessionBody reads a renew or close: the id and the secret, after the
// ACL's check of the session's holder (read from this leader's state; a
// session it does not know goes on, to be refused as unknown or ended).
func (s *Server) sessionBody(w http.ResponseWriter, r *http.Request, action acl.Action) (uint64, string, error) {
	id, err := sessionID(r)
	if err != nil {
		return 0, "", err
	}
	var body wire.SessionLeaseRequest
	if err := request.DecodeJSON(w, r, &body); err != nil {
		return 0, "", err
	}
	if err := request.ValidateSessionLease(&body); err != nil {
		return 0, "", err
	}
	if st, err := s.co.Session(r.Context(), id, true); err == nil && !acl.SessionAllowed(r.Context(), action, st.Holder) {
		return 0, "", sessionForbidden(r, action, st.Holder)
	}
	return id, body.Lease, nil
}

func (s *Server) renewSession(w http.ResponseWriter, r *http.Request) (any, error) {
	id, secret, err := s.sessionBody(w, r, acl.ActionRenew)
	if err != nil {
		return nil, err
	}
	ctx, cancel := s.work(r, 0)
	defer cancel()
	ss, err := s.co.RenewSession(ctx, id, secret)
	if err != nil {
		return nil, err
	}
	return wire.SessionRenewResponse{Session: ss.ID, TTLMillis: ss.TTLMillis}, nil
}

func (s *Server) closeSession(w http.ResponseWriter, r *http.Request) (any, error) {
	id, secret, err := s.sessionBody(w, r, acl.ActionRelease)
	if err != nil {
		return nil, err
	}
	ctx, cancel := s.work(r, 0)
	defer cancel()
	ended, err := s.co.CloseSession(ctx, id, secret)
	if err != nil {
		return nil, err
	}
	return wire.SessionCloseResponse{Session: id, Released: sessionGrants(ended)}, nil
}

func (s *Server) getSession(w http.ResponseWriter, r *http.Request) (any, error) {
	id, err := sessionID(r)
	if err != nil {
		return nil, err
	}
	ctx, cancel := s.work(r, 0)
	defer cancel()
	st, err := s.co.Session(ctx, id, forward.IsStale(r))
	if err != nil {
		return nil, err
	}
	if !acl.SessionAllowed(r.Context(), acl.ActionReadLock, st.Holder) {
		return nil, sessionForbidden(r, acl.ActionReadLock, st.Holder)
	}
	return sessionStatus(st), nil
}

func (s *Server) listSessions(w http.ResponseWriter, r *http.Request) (any, error) {
	ctx, cancel := s.work(r, 0)
	defer cancel()
	all, err := s.co.Sessions(ctx, forward.IsStale(r))
	if err != nil {
		return nil, err
	}
	out := wire.SessionList{Sessions: []wire.SessionStatus{}}
	for _, st := range all {
		if acl.SessionAllowed(r.Context(), acl.ActionReadLock, st.Holder) {
			out.Sessions = append(out.Sessions, sessionStatus(st))
		}
	}
	return out, nil
}

func sessionStatus(st coord.SessionStatus) wire.SessionStatus {
	out := wire.SessionStatus{Session: st.ID, Holder: st.Holder, TTLMillis: st.TTLMillis, LockDelayMillis: st.LockDelayMillis,
		Grants: sessionGrants(st.Grants)}
	if st.Known {
		ms := st.Remaining.Milliseconds()
		out.RemainingMillis = &ms
	}
	return out
}

func sessionGrants(gs []fsm.SessionGrant) []wire.SessionGrant {
	out := make([]wire.SessionGrant, 0, len(gs))
	for _, g := range gs {
		kind := wire.GrantKindLock
		if g.Semaphore {
			kind = wire.GrantKindSemaphore
		}
		out = append(out, wire.SessionGrant{Kind: kind, Name: g.Name, Token: g.Token})
	}
	return out
}

func sessionForbidden(r *http.Request, action acl.Action, holder string) error {
	who := "this token"
	if p, ok := acl.PrincipalFrom(r.Context()); ok {
		who = "token " + p.Name + " (" + string(p.Role) + ")"
	}
	return &wire.Error{Code: wire.CodeForbidden, Message: who + " may not " + string(action) + " a session of holder " + holder}
}
