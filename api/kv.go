package api

import (
	"errors"
	"fmt"
	"github.com/fencer-io/fencer/api/wire"
	"io"
	"net/http"
	"strconv"

	"github.com/go-chi/chi/v5"
)

// Headers of the fenced key-value store.
const (
	HeaderToken = wire.HeaderToken
	HeaderLock  = wire.HeaderLock
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
	raw, present := r.Header[HeaderToken]
	token, ok := uint64(0), false
	if present && len(raw) == 1 {
		token, ok = ParseToken(raw[0])
	}
	if !ok {
		writeErr(w, &Error{Code: CodeMissingToken, Message: "a fenced write needs exactly one " + HeaderToken + " header with the positive decimal token of your grant"})
		return
	}
	lock := r.Header.Get(HeaderLock)
	if lock != "" {
		if err := checkName(lock); err != nil {
			writeErr(w, err)
			return
		}
	}
	value, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxBodyBytes))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			writeErr(w, &Error{Code: CodeBodyTooLarge, Message: fmt.Sprintf("value exceeds %d bytes", MaxBodyBytes)})
			return
		}
		writeErr(w, badRequest(CodeInvalidJSON, "reading body: "+err.Error()))
		return
	}
	ctx, cancel := s.work(r, 0)
	defer cancel()
	if _, err := s.c.Put(ctx, key, value, token, lock); err != nil {
		writeErr(w, err)
		return
	}
	writeJSON(w, http.StatusOK, PutResponse{Key: key, Token: token})
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
		writeError(w, http.StatusNotFound, &Error{Code: CodeNotFound, Message: fmt.Sprintf("key %q has never been written", key)})
		return
	}
	w.Header().Set(HeaderToken, strconv.FormatUint(k.Token, 10))
	w.Header().Set("Content-Type", "application/octet-stream")
	w.WriteHeader(http.StatusOK)
	w.Write(k.Value)
}
