package api

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"

	"github.com/go-chi/chi/v5"

	"github.com/fencer-io/fencer/api/forward"
	"github.com/fencer-io/fencer/api/internal/request"
	"github.com/fencer-io/fencer/api/wire"
	"github.com/fencer-io/fencer/coord"
	"github.com/fencer-io/fencer/internal/acl"
)

func (s *Server) kvRoutes() chi.Router {
	r := chi.NewRouter()
	r.Use(s.fwd.LeaderOnly)
	r.Put("/{key}", handleJSON(s.putKey))
	r.Get("/{key}", s.getKey)
	r.Delete("/{key}", handleJSON(s.deleteKey))
	return r
}

// principalName is the authenticated caller of r, "" when the cluster has
// no ACL. On the leader, a forwarded request's is the original caller's.
func principalName(r *http.Request) string {
	if p, ok := acl.PrincipalFrom(r.Context()); ok {
		return p.Name
	}
	return ""
}

// putKey stores the body under key only if the Fencing-Token header is
// greater than the key's last token. A missing token (no header, an empty
// one, as a shell writes an unset variable, or 0, which is never issued, as
// fence reads it too) fails closed with 428 missing_token; a malformed one
// ("007", "-3", two headers) with 400 invalid_token, the code and status of
// every other malformed token.
func (s *Server) putKey(w http.ResponseWriter, r *http.Request) (any, error) {
	key, err := request.KeyName(r)
	if err != nil {
		return nil, err
	}
	token, err := fencingToken(r.Header)
	if err != nil {
		return nil, err
	}
	lock := r.Header.Get(wire.HeaderLock)
	if lock != "" {
		if err := request.CheckName(lock); err != nil {
			return nil, err
		}
	}
	value, err := io.ReadAll(http.MaxBytesReader(w, r.Body, wire.MaxBodyBytes))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return nil, &wire.Error{Code: wire.CodeBodyTooLarge, Message: fmt.Sprintf("value exceeds %d bytes", wire.MaxBodyBytes)}
		}
		return nil, badRequest(wire.CodeInvalidJSON, "reading body: "+err.Error())
	}
	ctx, cancel := s.work(r, 0)
	defer cancel()
	put := coord.PutRequest{Key: key, Value: value, Token: token, Lock: lock, Principal: principalName(r)}
	if _, err := s.co.Put(ctx, put); err != nil {
		return nil, err
	}
	return wire.PutResponse{Key: key, Token: token}, nil
}

// fencingToken reads the Fencing-Token header of a fenced write.
func fencingToken(h http.Header) (uint64, error) {
	raw := h[wire.HeaderToken]
	if len(raw) == 0 || (len(raw) == 1 && (raw[0] == "" || raw[0] == "0")) {
		return 0, &wire.Error{Code: wire.CodeMissingToken, Message: "a fenced write needs a " + wire.HeaderToken + " header with the token of your grant"}
	}
	if len(raw) > 1 {
		return 0, badRequest(wire.CodeInvalidToken, fmt.Sprintf("%s: %d headers, want exactly one", wire.HeaderToken, len(raw)))
	}
	token, ok := wire.ParseToken(raw[0])
	if !ok {
		return 0, badRequest(wire.CodeInvalidToken, fmt.Sprintf("%s %.32q: want a positive decimal integer without sign, spaces or leading zeros", wire.HeaderToken, raw[0]))
	}
	return token, nil
}

// deleteKey removes a key and its mark through the log (operators only when
// there is an ACL, which audits it), so that the next fenced write to it is
// accepted whatever its token: the way out of a mark no holder can pass.
func (s *Server) deleteKey(w http.ResponseWriter, r *http.Request) (any, error) {
	key, err := request.KeyName(r)
	if err != nil {
		return nil, err
	}
	ctx, cancel := s.work(r, 0)
	defer cancel()
	res, err := s.co.DeleteKey(ctx, key)
	if err != nil {
		return nil, err
	}
	s.log.Info("key deleted", "key", key, "last_token", res.LastToken, "by", principalName(r), "remote", r.RemoteAddr)
	return wire.DeleteKeyResponse{Key: key, Deleted: true, LastToken: res.LastToken}, nil
}

func (s *Server) getKey(w http.ResponseWriter, r *http.Request) {
	key, err := request.KeyName(r)
	if err != nil {
		writeErr(w, err)
		return
	}
	ctx, cancel := s.work(r, 0)
	defer cancel()
	k, found, index, err := s.co.Get(ctx, key, forward.IsStale(r))
	if err != nil {
		writeErr(w, err)
		return
	}
	w.Header().Set(wire.HeaderIndex, strconv.FormatUint(index, 10))
	if !found {
		writeError(w, http.StatusNotFound, &wire.Error{Code: wire.CodeNotFound, Message: fmt.Sprintf("key %q has never been written", key)})
		return
	}
	w.Header().Set(wire.HeaderToken, strconv.FormatUint(k.Token, 10))
	w.Header().Set("Content-Type", "application/octet-stream")
	w.WriteHeader(http.StatusOK)
	w.Write(k.Value)
}
