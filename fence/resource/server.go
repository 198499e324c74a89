package resource

import (
	"encoding/json"
	"io"
	"net/http"
	"strconv"

	"github.com/go-chi/chi/v5"

	"github.com/fencer-io/fencer/api/wire"
	"github.com/fencer-io/fencer/fence"
)

// Server is the example fenced storage server: byte values under string
// keys, each key fenced on its own.
type Server struct {
	store *fence.Store
}

// NewServer returns the HTTP API of a fenced storage server over store:
//
//	PUT /v1/data/{key}        store the body; needs Fencing-Token (and
//	                          optionally Fencing-Sequence); 200 with the mark
//	GET /v1/data/{key}        the value, with the Fencing-Token (and
//	                          Fencing-Sequence) of the write that stored it
//	GET /v1/high-water/{key}  {"key","token","seq"}
//	GET /healthz              200 ok
//
// The fence is the store's: per key unless the store was opened StoreWide.
func NewServer(store *fence.Store) http.Handler {
	s := &Server{store: store}
	return s.Routes()
}

// Routes returns the server's router.
func (s *Server) Routes() chi.Router {
	r := chi.NewRouter()
	r.Get("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, "ok\n")
	})
	r.Route("/v1", func(r chi.Router) {
		r.With(fence.Middleware(s.store, keyParam)).Put("/data/{key}", s.putData)
		r.Get("/data/{key}", s.getData)
		r.Get("/high-water/{key}", s.getHighWater)
	})
	return r
}

func keyParam(r *http.Request) string { return chi.URLParam(r, "key") }

// MarkResponse is the JSON body of a successful PUT and of GET /v1/high-water.
type MarkResponse struct {
	Key   string `json:"key"`
	Token uint64 `json:"token"`
	Seq   uint64 `json:"seq"`
}

// putData runs inside fence.Middleware's transaction, which has already
// checked the token and will record the mark if this handler answers < 400.
func (s *Server) putData(w http.ResponseWriter, r *http.Request) {
	tx := fence.TxFromContext(r.Context())
	body, err := io.ReadAll(r.Body)
	if err != nil {
		fence.WriteError(w, err)
		return
	}
	if err := tx.Put(tx.Key(), encodeRecord(tx.Mark(), body)); err != nil {
		fence.WriteError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, MarkResponse{Key: tx.Key(), Token: tx.Mark().Token, Seq: tx.Mark().Seq})
}

func (s *Server) getData(w http.ResponseWriter, r *http.Request) {
	key := keyParam(r)
	var rec []byte
	if err := s.store.View(func(tx *fence.Tx) error { rec = tx.Get(key); return nil }); err != nil {
		fence.WriteError(w, err)
		return
	}
	if rec == nil {
		wire.WriteError(w, http.StatusNotFound, &wire.Error{Code: wire.CodeNotFound, Message: "no value for key " + strconv.Quote(key)})
		return
	}
	m, value, err := decodeRecord(rec)
	if err != nil {
		fence.WriteError(w, err)
		return
	}
	w.Header().Set(wire.HeaderToken, strconv.FormatUint(m.Token, 10))
	if m.Seq != 0 {
		w.Header().Set(wire.HeaderSequence, strconv.FormatUint(m.Seq, 10))
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	_, _ = w.Write(value)
}

func (s *Server) getHighWater(w http.ResponseWriter, r *http.Request) {
	key := keyParam(r)
	m, err := s.store.HighWater(key)
	if err != nil {
		fence.WriteError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, MarkResponse{Key: key, Token: m.Token, Seq: m.Seq})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
