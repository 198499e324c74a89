package api

import (
	"net/http"

	"github.com/fencer-io/fencer/api/internal/request"
	"github.com/fencer-io/fencer/api/wire"
	"github.com/fencer-io/fencer/fsm"
	"github.com/fencer-io/fencer/internal/acl"
)

// Revoke (api/wire/revoke.go): an operator ends a lock's grant, a permit
// or a session now. The ACL lets only operators through (acl.ActionRevoke,
// audited) and scopes a lock's or a semaphore's by name; a session's holder
// is checked here against the operator's lock prefixes, as a close's.

// revokeBody reads a lock's or a semaphore's revoke: the name and the
// token of the grant.
func revokeBody(w http.ResponseWriter, r *http.Request) (string, uint64, error) {
	name, body, err := request.NamedBody(w, r, func(b *wire.RevokeRequest) error {
		if b.Token == 0 {
			return &wire.Error{Code: wire.CodeInvalidToken, Message: "token: want the token of the grant to revoke"}
		}
		return nil
	})
	return name, body.Token, err
}

func (s *Server) revokeLock(w http.ResponseWriter, r *http.Request) (any, error) {
	name, token, err := revokeBody(w, r)
	if err != nil {
		return nil, err
	}
	ctx, cancel := s.work(r, 0)
	defer cancel()
	res, err := s.co.Revoke(ctx, name, token)
	if err != nil {
		return nil, err
	}
	out := wire.RevokeResponse{Lock: name, Holder: res.Freed.Holder, Token: res.Freed.Token}
	if res.Next != nil {
		out.NextHolder, out.NextToken = res.Next.Holder, res.Next.Token
	}
	if res.Delay != nil {
		out.LockDelayMillis = res.Delay.Millis
	}
	return out, nil
}

func (s *Server) revokePermit(w http.ResponseWriter, r *http.Request) (any, error) {
	name, token, err := revokeBody(w, r)
	if err != nil {
		return nil, err
	}
	ctx, cancel := s.work(r, 0)
	defer cancel()
	res, err := s.co.RevokePermit(ctx, name, token)
	if err != nil {
		return nil, err
	}
	return permitRevoked(name, res), nil
}

func permitRevoked(name string, res fsm.SemReleaseResult) wire.RevokeResponse {
	out := wire.RevokeResponse{Semaphore: name, Holder: res.Freed.Holder, Token: res.Freed.Token}
	if res.Next != nil {
		out.NextHolder, out.NextToken = res.Next.Permit.Holder, res.Next.Permit.Token
	}
	if res.Delay != nil {
		out.LockDelayMillis = res.Delay.Millis
	}
	return out
}

// revokeSession takes no body: the id is the whole request.
func (s *Server) revokeSession(w http.ResponseWriter, r *http.Request) (any, error) {
	id, err := sessionID(r)
	if err != nil {
		return nil, err
	}
	if st, err := s.co.Session(r.Context(), id, true); err == nil && !acl.SessionAllowed(r.Context(), acl.ActionRevoke, st.Holder) {
		return nil, sessionForbidden(r, acl.ActionRevoke, st.Holder)
	}
	ctx, cancel := s.work(r, 0)
	defer cancel()
	rec, ended, err := s.co.RevokeSession(ctx, id)
	if err != nil {
		return nil, err
	}
	return wire.SessionRevokeResponse{Session: id, Holder: rec.Holder, Revoked: sessionGrants(ended)}, nil
}
