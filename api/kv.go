package api

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"

	"github.com/go-chi/chi/v5"

	"github.com/fencer-io/fencer/api/wire"
)

func (s *Server) kvRoutes() chi.Router {
	r := chi.NewRouter()
	r.Use(s.fwd.leaderOnly)
	r.Put("/{key}", s.putKey)
	r.Get("/{key}", s.getKey)
	return r
}

// putKey stores the body under key only if the Fencing-Token header is
// greater than the key's last token. A missing or malformed token fails
// closed with 428: it is never read as zero.
func (s *Server) putKey(w http.ResponseWriter, r *http.Request) {
	key := chi.URLParam(r, "key")
	if err := checkKey(key); err != nil {
		writeErr(w, err)
		return
	}
	raw, present := r.Header[wire.HeaderToken]
	token, ok := uint64(0), false
	if present && len(raw) == 1 {
		token, ok = wire.ParseToken(raw[0])
	}
	if !ok {
		writeErr(w, &wire.Error{Code: wire.CodeMissingToken, Message: "a fenced write needs exactly one " + wire.HeaderToken + " header with the positive decimal token of your grant"})
		return
	}
	lock := r.Header.Get(wire.HeaderLock)
	if lock != "" {
		if err := checkName(lock); err != nil {
			writeErr(w, err)
			return
		}
	}
	value, err := io.ReadAll(http.MaxBytesReader(w, r.Body, wire.MaxBodyBytes))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			writeErr(w, &wire.Error{Code: wire.CodeBodyTooLarge, Message: fmt.Sprintf("value exceeds %d bytes", wire.MaxBodyBytes)})
			return
		}
		writeErr(w, badRequest(wire.CodeInvalidJSON, "reading body: "+err.Error()))
		return
	}
	ctx, cancel := s.work(r, 0)
	defer cancel()
	if _, err := s.c.Put(ctx, key, value, token, lock); err != nil {
		writeErr(w, err)
		return
	}
	writeJSON(w, http.StatusOK, wire.PutResponse{Key: key, Token: token})
}

func (s *Server) getKey(w http.ResponseWriter, r *http.Request) {
	key := chi.URLParam(r, "key")
	if err := checkKey(key); err != nil {
		writeErr(w, err)
		return
	}
	ctx, cancel := s.work(r, 0)
	defer cancel()
	k, found, err := s.c.Get(ctx, key, isStale(r))
	if err != nil {
		writeErr(w, err)
		return
	}
	if !found {
		writeError(w, http.StatusNotFound, &wire.Error{Code: wire.CodeNotFound, Message: fmt.Sprintf("key %q has never been written", key)})
		return
	}
	w.Header().Set(wire.HeaderToken, strconv.FormatUint(k.Token, 10))
	w.Header().Set("Content-Type", "application/octet-stream")
	w.WriteHeader(http.StatusOK)
	w.Write(k.Value)
}
