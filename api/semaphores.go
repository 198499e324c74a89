package api

import (
	"net/http"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/fencer-io/fencer/api/forward"
	"github.com/fencer-io/fencer/api/internal/request"
	"github.com/fencer-io/fencer/api/wire"
	"github.com/fencer-io/fencer/coord"
	"github.com/fencer-io/fencer/internal/acl"
)

// Semaphores: the lock routes' shapes, names and rules, in a namespace of
// their own.
func (s *Server) semaphoreRoutes() chi.Router {
	r := chi.NewRouter()
	r.Group(func(r chi.Router) {
		r.Use(s.fwd.LeaderOnly)
		r.Get("/", handleJSON(s.listSemaphores))
		r.Get("/{name}/history", handleJSON(s.semaphoreHistory)) // linearizable unless stale (history.go)
		r.Route("/{name}", func(r chi.Router) {
			r.Get("/", handleJSON(s.getSemaphore))
			r.Post("/acquire", handleJSON(s.acquirePermit))
			r.Post("/renew", handleJSON(s.renewPermit))
			r.Post("/release", handleJSON(s.releasePermit))
			r.Post("/revoke", handleJSON(s.revokePermit))
			r.Get("/check", handleJSON(s.checkPermit))
		})
	})
	return r
}

func (s *Server) acquirePermit(w http.ResponseWriter, r *http.Request) (any, error) {
	name, req, err := request.NamedSemAcquire(w, r)
	if err != nil {
		return nil, err
	}
	wait := time.Duration(req.WaitMs) * time.Millisecond
	ctx, cancel := s.work(r, wait)
	defer cancel()
	res, err := s.co.AcquirePermit(ctx, coord.PermitRequest{
		Semaphore: name,
		Holder:    req.Holder,
		Limit:     req.Limit,
		TTL:       time.Duration(req.TTLMillis) * time.Millisecond,
		Wait:      wait,
		RequestID: req.RequestID,
		Principal: principalName(r),
		LockDelay: time.Duration(req.LockDelayMillis) * time.Millisecond,

		Session:      req.Session,
		SessionLease: req.SessionLease,
		Durable:      req.Durable,
	})
	if err != nil {
		return nil, err
	}
	p := res.Permit
	return wire.PermitGrant{
		Semaphore: p.Semaphore, Holder: p.Holder, Token: p.Token, Lease: p.Lease, TTLMillis: p.TTLMillis,
		Limit: p.Limit, Held: res.Held, RequestID: p.RequestID, Existing: res.Existing, LockDelayMillis: p.LockDelayMillis,
		Session: p.Session, WaitIndex: p.WaitIndex,
	}, nil
}

func (s *Server) renewPermit(w http.ResponseWriter, r *http.Request) (any, error) {
	name, req, err := request.NamedBody(w, r, request.ValidateLease)
	if err != nil {
		return nil, err
	}
	ctx, cancel := s.work(r, 0)
	defer cancel()
	p, err := s.co.RenewPermit(ctx, name, req.Token, req.Lease)
	if err != nil {
		return nil, err
	}
	return wire.SemRenewResponse{Semaphore: name, Token: p.Token, TTLMillis: p.TTLMillis}, nil
}

func (s *Server) releasePermit(w http.ResponseWriter, r *http.Request) (any, error) {
	name, req, err := request.NamedBody(w, r, request.ValidateLease)
	if err != nil {
		return nil, err
	}
	ctx, cancel := s.work(r, 0)
	defer cancel()
	if err := s.co.ReleasePermit(ctx, name, req.Token, req.Lease); err != nil {
		return nil, err
	}
	return wire.SemReleaseResponse{Semaphore: name, Token: req.Token, Released: true}, nil
}

func semaphoreStatus(st coord.SemaphoreStatus) wire.SemaphoreStatus {
	out := wire.SemaphoreStatus{Semaphore: st.Name, Limit: st.Limit, Holders: []wire.PermitHolder{}, Waiters: st.Waiters}
	for _, p := range st.Holders {
		h := wire.PermitHolder{Holder: p.Holder, Token: p.Token, Session: p.Session}
		if p.Known {
			ms := p.Remaining.Milliseconds()
			h.RemainingMillis = &ms
		}
		out.Holders = append(out.Holders, h)
	}
	for _, d := range st.Delays {
		out.Delays = append(out.Delays, wire.SlotDelay{Since: d.Since, RemainingMillis: d.Remaining.Milliseconds()})
	}
	return out
}

func (s *Server) getSemaphore(w http.ResponseWriter, r *http.Request) (any, error) {
	name, err := request.LockName(r)
	if err != nil {
		return nil, err
	}
	ctx, cancel := s.work(r, 0)
	defer cancel()
	st, err := s.co.Semaphore(ctx, name, forward.IsStale(r))
	if err != nil {
		return nil, err
	}
	return semaphoreStatus(st), nil
}

func (s *Server) listSemaphores(w http.ResponseWriter, r *http.Request) (any, error) {
	ctx, cancel := s.work(r, 0)
	defer cancel()
	sems, err := s.co.Semaphores(ctx, forward.IsStale(r))
	if err != nil {
		return nil, err
	}
	out := wire.SemaphoreList{Semaphores: []wire.SemaphoreStatus{}}
	for _, st := range sems {
		if acl.LockVisible(r.Context(), st.Name) {
			out.Semaphores = append(out.Semaphores, semaphoreStatus(st))
		}
	}
	return out, nil
}

func (s *Server) checkPermit(w http.ResponseWriter, r *http.Request) (any, error) {
	name, err := request.LockName(r)
	if err != nil {
		return nil, err
	}
	token, err := request.QueryToken(r)
	if err != nil {
		return nil, err
	}
	ctx, cancel := s.work(r, 0)
	defer cancel()
	current, err := s.co.CheckPermit(ctx, name, token, forward.IsStale(r))
	if err != nil {
		return nil, err
	}
	return wire.PermitCheckResponse{Current: current}, nil
}
