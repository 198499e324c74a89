package api

import (
	"fmt"
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
	r.Use(s.fwd.LeaderOnly)
	r.Get("/", s.listSemaphores)
	r.Route("/{name}", func(r chi.Router) {
		r.Get("/", s.getSemaphore)
		r.Post("/acquire", s.acquirePermit)
		r.Post("/renew", s.renewPermit)
		r.Post("/release", s.releasePermit)
		r.Get("/check", s.checkPermit)
	})
	return r
}

func validateSemAcquire(r *wire.SemAcquireRequest) error {
	lock := wire.AcquireRequest{Holder: r.Holder, TTLMillis: r.TTLMillis, WaitMs: r.WaitMs, RequestID: r.RequestID, LockDelayMillis: r.LockDelayMillis}
	if err := request.ValidateAcquire(&lock); err != nil {
		return err
	}
	r.TTLMillis = lock.TTLMillis
	if r.Limit < 1 || r.Limit > wire.MaxSemaphoreLimit {
		return badRequest(wire.CodeInvalidLimit, fmt.Sprintf("limit %d: want 1 to %d", r.Limit, wire.MaxSemaphoreLimit))
	}
	return nil
}

func (s *Server) acquirePermit(w http.ResponseWriter, r *http.Request) {
	name, err := request.LockName(r)
	if err != nil {
		writeErr(w, err)
		return
	}
	var req wire.SemAcquireRequest
	if err := request.DecodeJSON(w, r, &req); err != nil {
		writeErr(w, err)
		return
	}
	if err := validateSemAcquire(&req); err != nil {
		writeErr(w, err)
		return
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
	})
	if err != nil {
		writeErr(w, err)
		return
	}
	p := res.Permit
	writeJSON(w, http.StatusOK, wire.PermitGrant{
		Semaphore: p.Semaphore, Holder: p.Holder, Token: p.Token, Lease: p.Lease, TTLMillis: p.TTLMillis,
		Limit: p.Limit, Held: res.Held, RequestID: p.RequestID, Existing: res.Existing, LockDelayMillis: p.LockDelayMillis,
	})
}

func (s *Server) renewPermit(w http.ResponseWriter, r *http.Request) {
	name, req, ok := s.leaseRequest(w, r)
	if !ok {
		return
	}
	ctx, cancel := s.work(r, 0)
	defer cancel()
	p, err := s.co.RenewPermit(ctx, name, req.Token, req.Lease)
	if err != nil {
		writeErr(w, err)
		return
	}
	writeJSON(w, http.StatusOK, wire.SemRenewResponse{Semaphore: name, Token: p.Token, TTLMillis: p.TTLMillis})
}

func (s *Server) releasePermit(w http.ResponseWriter, r *http.Request) {
	name, req, ok := s.leaseRequest(w, r)
	if !ok {
		return
	}
	ctx, cancel := s.work(r, 0)
	defer cancel()
	if err := s.co.ReleasePermit(ctx, name, req.Token, req.Lease); err != nil {
		writeErr(w, err)
		return
	}
	writeJSON(w, http.StatusOK, wire.SemReleaseResponse{Semaphore: name, Token: req.Token, Released: true})
}

func semaphoreStatus(st coord.SemaphoreStatus) wire.SemaphoreStatus {
	out := wire.SemaphoreStatus{Semaphore: st.Name, Limit: st.Limit, Holders: []wire.PermitHolder{}, Waiters: st.Waiters}
	for _, p := range st.Holders {
		h := wire.PermitHolder{Holder: p.Holder, Token: p.Token}
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

func (s *Server) getSemaphore(w http.ResponseWriter, r *http.Request) {
	name, err := request.LockName(r)
	if err != nil {
		writeErr(w, err)
		return
	}
	ctx, cancel := s.work(r, 0)
	defer cancel()
	st, err := s.co.Semaphore(ctx, name, forward.IsStale(r))
	if err != nil {
		writeErr(w, err)
		return
	}
	writeJSON(w, http.StatusOK, semaphoreStatus(st))
}

func (s *Server) listSemaphores(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := s.work(r, 0)
	defer cancel()
	sems, err := s.co.Semaphores(ctx, forward.IsStale(r))
	if err != nil {
		writeErr(w, err)
		return
	}
	out := wire.SemaphoreList{Semaphores: []wire.SemaphoreStatus{}}
	for _, st := range sems {
		if acl.LockVisible(r.Context(), st.Name) {
			out.Semaphores = append(out.Semaphores, semaphoreStatus(st))
		}
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) checkPermit(w http.ResponseWriter, r *http.Request) {
	name, err := request.LockName(r)
	if err != nil {
		writeErr(w, err)
		return
	}
	token, ok := wire.ParseToken(r.URL.Query().Get("token"))
	if !ok {
		writeErr(w, badRequest(wire.CodeInvalidToken, "token: want ?token=N with N a positive decimal integer"))
		return
	}
	ctx, cancel := s.work(r, 0)
	defer cancel()
	current, err := s.co.CheckPermit(ctx, name, token, forward.IsStale(r))
	if err != nil {
		writeErr(w, err)
		return
	}
	writeJSON(w, http.StatusOK, wire.PermitCheckResponse{Current: current})
}
