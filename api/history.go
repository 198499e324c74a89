package api

import (
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/fencer-io/fencer/api/forward"
	"github.com/fencer-io/fencer/api/internal/request"
	"github.com/fencer-io/fencer/api/wire"
	"github.com/fencer-io/fencer/coord"
	"github.com/fencer-io/fencer/fsm"
	"github.com/fencer-io/fencer/fsm/entry"
	"github.com/fencer-io/fencer/internal/acl"
)

// The grant history is replicated state. Its reads are linearizable, like
// every other read, unless ?stale=true: they are forwarded to the leader,
// which confirms it still leads before it answers, so that "never granted"
// or a history without the caller's own grant is never a follower's lag.
// With stale=true any node answers from its own applied state. Fencer-Index
// says the index the answer was read at.

// lockHistory answers GET /v1/locks/{name}/history?limit=N: the lock's last
// grants, newest first (all that are kept without a limit).
func (s *Server) lockHistory(w http.ResponseWriter, r *http.Request) (any, error) {
	name, limit, err := historyRequest(r)
	if err != nil {
		return nil, err
	}
	ctx, cancel := s.work(r, 0)
	defer cancel()
	grants, index, err := s.co.History(ctx, name, limit, forward.IsStale(r))
	if err != nil {
		return nil, err
	}
	w.Header().Set(wire.HeaderIndex, strconv.FormatUint(index, 10))
	return wire.LockHistory{Lock: name, Grants: wireGrants(grants)}, nil
}

// semaphoreHistory answers GET /v1/semaphores/{name}/history?limit=N: the
// semaphore's last permits, newest first, as lockHistory does a lock's.
func (s *Server) semaphoreHistory(w http.ResponseWriter, r *http.Request) (any, error) {
	name, limit, err := historyRequest(r)
	if err != nil {
		return nil, err
	}
	ctx, cancel := s.work(r, 0)
	defer cancel()
	grants, index, err := s.co.SemaphoreHistory(ctx, name, limit, forward.IsStale(r))
	if err != nil {
		return nil, err
	}
	w.Header().Set(wire.HeaderIndex, strconv.FormatUint(index, 10))
	return wire.SemaphoreHistory{Semaphore: name, Grants: wireGrants(grants)}, nil
}

// historyRequest reads a history's name and ?limit= (all that are kept
// without one).
func historyRequest(r *http.Request) (string, int, error) {
	name, err := request.LockName(r)
	if err != nil {
		return "", 0, err
	}
	limit := wire.MaxHistoryLimit
	if raw := r.URL.Query().Get("limit"); raw != "" {
		n, err := strconv.Atoi(raw)
		if err != nil || n < 1 || n > wire.MaxHistoryLimit {
			return "", 0, badRequest(wire.CodeInvalidLimit, "limit: want a number of grants from 1 to "+strconv.Itoa(wire.MaxHistoryLimit))
		}
		limit = n
	}
	return name, limit, nil
}

func wireGrants(grants []entry.GrantRecord) []wire.GrantRecord {
	out := make([]wire.GrantRecord, 0, len(grants))
	for _, g := range grants {
		out = append(out, wireGrant(g))
	}
	return out
}

// token answers GET /v1/tokens/{token}: which lock (or semaphore) and
// holder had the token, and how the grant ended. An ACL principal sees
// only grants of names it may read (semaphores follow the locks' prefixes):
// another's is 403 forbidden (the token's existence is no secret, tokens
// being log indexes; its name and holder are).
func (s *Server) token(w http.ResponseWriter, r *http.Request) {
	token, ok := wire.ParseToken(chi.URLParam(r, "token"))
	if !ok {
		writeErr(w, badRequest(wire.CodeInvalidToken, "token: want /v1/tokens/N with N a positive decimal integer"))
		return
	}
	ctx, cancel := s.work(r, 0)
	defer cancel()
	g, index, err := s.co.Grant(ctx, token, forward.IsStale(r))
	if err != nil && !errors.As(err, new(*coord.TokenError)) {
		writeErr(w, err)
		return
	}
	w.Header().Set(wire.HeaderIndex, strconv.FormatUint(index, 10))
	var unknown *coord.TokenError
	if errors.As(err, &unknown) {
		writeError(w, http.StatusNotFound, &wire.Error{Code: wire.CodeUnknownToken, Message: err.Error(), Reason: tokenReason(unknown.Lookup)})
		return
	}
	if err != nil {
		writeErr(w, err)
		return
	}
	name, kind := g.Lock, "lock"
	if g.Semaphore != "" {
		name, kind = g.Semaphore, "semaphore"
	}
	if p, authenticated := acl.PrincipalFrom(r.Context()); authenticated && !acl.Allow(p, acl.ActionReadLock, name) {
		writeError(w, http.StatusForbidden, &wire.Error{Code: wire.CodeForbidden,
			Message: "token " + p.Name + " (" + string(p.Role) + ") may not read the " + kind + " of token " + strconv.FormatUint(token, 10)})
		return
	}
	writeJSON(w, http.StatusOK, wireGrant(g))
}

func tokenReason(l fsm.TokenLookup) string {
	switch l {
	case fsm.TokenNotKept, fsm.TokenPermitNotKept:
		return wire.ReasonNotKept
	case fsm.TokenNoHistory:
		return wire.ReasonNoHistory
	}
	return wire.ReasonNeverGranted
}

func wireGrant(g entry.GrantRecord) wire.GrantRecord {
	out := wire.GrantRecord{Token: g.Token, Lock: g.Lock, Semaphore: g.Semaphore, Holder: g.Holder, GrantedIndex: g.GrantedIndex, Ended: g.Ended, EndedIndex: g.EndedIndex,
		Names: g.Names}
	if g.Mode == entry.ModeShared {
		out.Mode = wire.ModeShared // absent: exclusive, as every record before modes
	}
	if out.Ended == "" {
		out.Ended = wire.GrantHeld
	}
	return out
}

// blockingDeadline lets a blocking read outlast the server's write timeout
// (which bounds ordinary requests) by its wait, here and on a follower
// forwarding it to the leader alike.
func blockingDeadline(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, wait, ok, err := request.BlockingWait(r); ok && err == nil {
			http.NewResponseController(w).SetWriteDeadline(time.Now().Add(wait + time.Minute))
		}
		next.ServeHTTP(w, r)
	})
}
