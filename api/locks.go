package api

import (
	"bufio"
	"context"
	"encoding/json"
	"iter"
	"net/http"
	"strconv"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/fencer-io/fencer/api/forward"
	"github.com/fencer-io/fencer/api/internal/request"
	"github.com/fencer-io/fencer/api/wire"
	"github.com/fencer-io/fencer/coord"
	"github.com/fencer-io/fencer/internal/acl"
)

func (s *Server) lockRoutes() chi.Router {
	r := chi.NewRouter()
	r.Group(func(r chi.Router) {
		r.Use(blockingDeadline, s.fwd.LeaderOnly)
		r.Get("/", s.listLocks)
		// A multi-lock's: chi matches these before a lock named so, whose
		// own routes are /{name}/acquire and the rest.
		r.Post("/acquire", handleJSON(s.multiAcquire))
		r.Post("/renew", handleJSON(s.multiRenew))
		r.Post("/release", handleJSON(s.multiRelease))
		r.Get("/{name}/history", handleJSON(s.lockHistory))
		r.Route("/{name}", func(r chi.Router) {
			r.Get("/", handleJSON(s.getLock))
			r.Post("/acquire", handleJSON(s.acquire))
			r.Post("/renew", handleJSON(s.renew))
			r.Post("/release", handleJSON(s.release))
			r.Post("/revoke", handleJSON(s.revokeLock))
			r.Post("/value", handleJSON(s.proclaim))
			r.Get("/check", handleJSON(s.check))
		})
	})
	return r
}

// work bounds a request's cluster work.
func (s *Server) work(r *http.Request, extra time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(r.Context(), s.requestTimeout+extra)
}

func (s *Server) acquire(w http.ResponseWriter, r *http.Request) (any, error) {
	name, req, err := request.NamedAcquire(w, r)
	if err != nil {
		return nil, err
	}
	wait := time.Duration(req.WaitMs) * time.Millisecond
	ctx, cancel := s.work(r, wait)
	defer cancel()
	res, err := s.co.Acquire(ctx, coord.AcquireRequest{
		Lock:      name,
		Holder:    req.Holder,
		TTL:       time.Duration(req.TTLMillis) * time.Millisecond,
		Wait:      wait,
		RequestID: req.RequestID,
		Principal: principalName(r),
		LockDelay: time.Duration(req.LockDelayMillis) * time.Millisecond,
		Value:     req.Value,

		Session:      req.Session,
		SessionLease: req.SessionLease,
		Shared:       req.Mode == wire.ModeShared,
		Durable:      req.Durable,
	})
	if err != nil {
		return nil, err
	}
	g := res.Grant
	return wire.Grant{
		Lock:      g.Name,
		Holder:    g.Holder,
		Token:     g.Token,
		Lease:     g.Lease,
		TTLMillis: g.TTLMillis,
		RequestID: g.RequestID,
		Existing:  res.Existing,

		LockDelayMillis: g.LockDelayMillis,
		Value:           g.Value,
		Session:         g.Session,
		Mode:            g.Mode,
		WaitIndex:       g.WaitIndex,
	}, nil
}

func (s *Server) renew(w http.ResponseWriter, r *http.Request) (any, error) {
	name, req, err := request.NamedBody(w, r, request.ValidateLease)
	if err != nil {
		return nil, err
	}
	ctx, cancel := s.work(r, 0)
	defer cancel()
	l, err := s.co.Renew(ctx, name, req.Token, req.Lease)
	if err != nil {
		return nil, err
	}
	return wire.RenewResponse{Lock: name, Token: l.Token, TTLMillis: l.TTLMillis}, nil
}

func (s *Server) release(w http.ResponseWriter, r *http.Request) (any, error) {
	name, req, err := request.NamedBody(w, r, request.ValidateLease)
	if err != nil {
		return nil, err
	}
	ctx, cancel := s.work(r, 0)
	defer cancel()
	if err := s.co.Release(ctx, name, req.Token, req.Lease); err != nil {
		return nil, err
	}
	return wire.ReleaseResponse{Lock: name, Token: req.Token, Released: true}, nil
}

func lockStatus(st coord.LockStatus) wire.LockStatus {
	out := wire.LockStatus{Lock: st.Name, Held: st.Held, Waiters: st.Waiters}
	if st.Held {
		out.Holder, out.Token, out.TTLMillis = st.Holder, st.Token, st.TTLMillis
		out.LockDelayMillis, out.Value, out.Session = st.LockDelayMillis, st.Value, st.Session
		if st.Known {
			ms := st.Remaining.Milliseconds()
			out.RemainingMillis = &ms
		}
	}
	if st.Delayed {
		ms := st.DelayRemaining.Milliseconds()
		out.DelayRemainingMillis = &ms
	}
	for _, g := range st.Shared {
		h := wire.SharedHolder{Holder: g.Holder, Token: g.Token, TTLMillis: g.TTLMillis, LockDelayMillis: g.LockDelayMillis, Session: g.Session}
		if g.Known {
			ms := g.Remaining.Milliseconds()
			h.RemainingMillis = &ms
		}
		out.SharedHolders = append(out.SharedHolders, h)
	}
	return out
}

func (s *Server) getLock(w http.ResponseWriter, r *http.Request) (any, error) {
	name, err := request.LockName(r)
	if err != nil {
		return nil, err
	}
	index, wait, blocking, err := request.BlockingWait(r)
	if err != nil {
		return nil, err
	}
	if blocking {
		// A blocking read (Consul's): wait for an event of this lock
		// after index, then read. A node that stops leading meanwhile
		// still answers when the wait ends; the read then says where to go.
		release, err := s.blocking.Take(w, r)
		if err != nil {
			return nil, err
		}
		defer release()
		sess := acl.SessionFrom(r.Context())
		if _, err := s.co.WaitLock(r.Context(), name, index, wait, sess.Changed()); err != nil {
			return nil, err
		}
		// The ACL may have been reloaded meanwhile: answer only what the
		// token may still read.
		if err := reauthorize(w, sess, acl.ActionReadLock, name); err != nil {
			return nil, err
		}
	}
	ctx, cancel := s.work(r, 0)
	defer cancel()
	// Read before the lock: an entry applied between the two is then
	// above the index a client waits from next, so it wakes it (at worst
	// spuriously) rather than being missed.
	at := s.co.AppliedIndex()
	st, err := s.co.Lock(ctx, name, forward.IsStale(r))
	if err != nil {
		return nil, err
	}
	w.Header().Set(wire.HeaderIndex, strconv.FormatUint(at, 10))
	return lockStatus(st), nil
}

func (s *Server) listLocks(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := s.work(r, 0)
	defer cancel()
	locks, index, err := s.co.Locks(ctx, forward.IsStale(r))
	if err != nil {
		writeErr(w, err)
		return
	}
	w.Header().Set(wire.HeaderIndex, strconv.FormatUint(index, 10))
	writeLockList(w, locks, func(name string) bool { return acl.LockVisible(r.Context(), name) })
}

// writeLockList streams a LockList of the visible locks one lock at a time,
// so that listing a million locks builds neither a copy of them nor the
// whole body in memory first.
func writeLockList(w http.ResponseWriter, locks iter.Seq[coord.LockStatus], visible func(string) bool) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	bw := bufio.NewWriterSize(w, 32<<10)
	bw.WriteString(`{"locks":[`)
	var buf []byte
	first := true
	for st := range locks {
		if !visible(st.Name) {
			continue
		}
		if !first {
			bw.WriteByte(',')
		}
		first = false
		buf, _ = json.Marshal(lockStatus(st)) // cannot fail: plain fields
		if _, err := bw.Write(buf); err != nil {
			return // the client went away
		}
	}
	bw.WriteString("]}\n")
	bw.Flush()
}

func (s *Server) check(w http.ResponseWriter, r *http.Request) (any, error) {
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
	c, err := s.co.Check(ctx, name, token, forward.IsStale(r))
	if err != nil {
		return nil, err
	}
	out := wire.CheckResponse{Current: c.Current, Token: c.Token}
	switch {
	case c.Current && c.Shared:
		out.Mode = wire.ModeShared
	case c.Current:
		out.Mode = wire.ModeExclusive
	}
	return out, nil
}

// proclaim changes the value the holder publishes (an election's leader).
func (s *Server) proclaim(w http.ResponseWriter, r *http.Request) (any, error) {
	name, req, err := request.NamedBody(w, r, request.ValidateValue)
	if err != nil {
		return nil, err
	}
	ctx, cancel := s.work(r, 0)
	defer cancel()
	l, err := s.co.Proclaim(ctx, name, req.Token, req.Lease, req.Value)
	if err != nil {
		return nil, err
	}
	return wire.ValueResponse{Lock: name, Token: l.Token, Value: l.Value}, nil
}
