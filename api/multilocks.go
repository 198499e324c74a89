package api

import (
	"net/http"
	"time"

	"github.com/fencer-io/fencer/api/internal/request"
	"github.com/fencer-io/fencer/api/wire"
	"github.com/fencer-io/fencer/coord"
	"github.com/fencer-io/fencer/internal/acl"
)

// Multi-locks (coord/multilocks.go): POST /v1/locks/acquire grants every
// name of its body or none, with one token and one secret; /renew and
// /release take that grant's lease and token. The ACL checks the role on
// the route and every name here (acl.NamesAllowed).

func (s *Server) multiAcquire(w http.ResponseWriter, r *http.Request) (any, error) {
	req, err := request.MultiAcquire(w, r)
	if err != nil {
		return nil, err
	}
	if err := namesForbidden(r, acl.ActionAcquire, req.Names); err != nil {
		return nil, err
	}
	wait := time.Duration(req.WaitMs) * time.Millisecond
	ctx, cancel := s.work(r, wait)
	defer cancel()
	res, err := s.co.MultiAcquire(ctx, coord.MultiAcquireRequest{
		Names: req.Names, Holder: req.Holder, TTL: time.Duration(req.TTLMillis) * time.Millisecond, Wait: wait,
		Mode: req.Mode, RequestID: req.RequestID, Principal: principalName(r),
	})
	if err != nil {
		return nil, err
	}
	g := res.Grant
	return wire.MultiGrant{Names: g.Names, Holder: g.Holder, Token: g.Token, Lease: g.Lease, TTLMillis: g.TTLMillis,
		Mode: g.Mode, RequestID: g.RequestID, Existing: res.Existing}, nil
}

func (s *Server) multiRenew(w http.ResponseWriter, r *http.Request) (any, error) {
	req, err := s.multiLease(w, r, acl.ActionRenew)
	if err != nil {
		return nil, err
	}
	ctx, cancel := s.work(r, 0)
	defer cancel()
	g, err := s.co.RenewMulti(ctx, req.Token, req.Lease)
	if err != nil {
		return nil, err
	}
	return wire.MultiRenewResponse{Names: g.Names, Token: g.Token, TTLMillis: g.TTLMillis}, nil
}

func (s *Server) multiRelease(w http.ResponseWriter, r *http.Request) (any, error) {
	req, err := s.multiLease(w, r, acl.ActionRelease)
	if err != nil {
		return nil, err
	}
	ctx, cancel := s.work(r, 0)
	defer cancel()
	g, err := s.co.ReleaseMulti(ctx, req.Token, req.Lease)
	if err != nil {
		return nil, err
	}
	return wire.MultiReleaseResponse{Names: g.Names, Token: g.Token, Released: true}, nil
}

// multiLease reads a multi-grant's renew or release body, refusing a
// principal that may not act on one of its names.
func (s *Server) multiLease(w http.ResponseWriter, r *http.Request, action acl.Action) (wire.LeaseRequest, error) {
	var body wire.LeaseRequest
	if err := request.DecodeJSON(w, r, &body); err != nil {
		return body, err
	}
	if err := request.ValidateLease(&body); err != nil {
		return body, err
	}
	if g, ok := s.co.MultiGrant(body.Token); ok {
		if err := namesForbidden(r, action, g.Names); err != nil {
			return body, err
		}
	}
	return body, nil
}

// namesForbidden refuses a principal that may not perform action on one
// of names.
func namesForbidden(r *http.Request, action acl.Action, names []string) error {
	name, ok := acl.NamesAllowed(r.Context(), action, names)
	if ok {
		return nil
	}
	who := "this token"
	if p, authenticated := acl.PrincipalFrom(r.Context()); authenticated {
		who = "token " + p.Name + " (" + string(p.Role) + ")"
	}
	return &wire.Error{Code: wire.CodeForbidden, Message: who + " may not " + string(action) + " " + name + ", a name of the multi-lock"}
}
