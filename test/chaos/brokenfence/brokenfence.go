// Package brokenfence is the negative control of the chaos suite: the
// example resource (fence/resource) with a deliberate fencing bug. A checker
// that cannot see such a server corrupt data cannot be trusted to see a
// correct one not do so. It lives in test code so that no build of fencer
// can serve it.
//
// The server answers reads with the real resource server over the same
// store, so what a checker reads is exactly what the real server would
// return; only PUT is broken.
package brokenfence

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"

	"github.com/fencer-io/fencer/api/wire"
	"github.com/fencer-io/fencer/fence"
	"github.com/fencer-io/fencer/fence/resource"
)

// Mode selects the bugs.
type Mode uint

const (
	// MissingAsZero treats a missing Fencing-Token as token 0 and skips the
	// check for it: the compatibility shim that lets a client which dropped
	// the header overwrite anything.
	MissingAsZero Mode = 1 << iota

	// ForgetOnRestart keeps high-water marks only in memory, so a new
	// server over the same store (a restart) accepts tokens older than ones
	// it already accepted. Values are still stored durably.
	ForgetOnRestart
)

var modeNames = []struct {
	name string
	mode Mode
}{
	{"missing-as-zero", MissingAsZero},
	{"forget-on-restart", ForgetOnRestart},
}

// ParseMode parses a comma-separated list of modes ("missing-as-zero",
// "forget-on-restart"); "" means none.
func ParseMode(s string) (Mode, error) {
	var m Mode
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		found := false
		for _, n := range modeNames {
			if n.name == f {
				m |= n.mode
				found = true
			}
		}
		if !found {
			return 0, fmt.Errorf("brokenfence: unknown mode %q", f)
		}
	}
	return m, nil
}

// server is the real resource with PUT (and, when marks are forgotten, the
// high-water answer) replaced.
type server struct {
	store *fence.Store
	mode  Mode
	real  http.Handler

	mu       sync.Mutex
	memMarks map[string]fence.Mark
}

// NewServer returns the resource's HTTP API over store, broken by mode.
func NewServer(store *fence.Store, mode Mode) http.Handler {
	s := &server{store: store, mode: mode, real: resource.NewServer(store), memMarks: map[string]fence.Mark{}}
	mux := http.NewServeMux()
	mux.HandleFunc("PUT /v1/data/{key}", s.put)
	if mode&ForgetOnRestart != 0 {
		mux.HandleFunc("GET /v1/high-water/{key}", s.highWater)
	}
	mux.Handle("/", s.real)
	return mux
}

// bypassPrefix names the fence scopes the broken server writes through. The
// store always fences, so the server bypasses it by fencing its writes with
// its own counter on a scope nobody else uses, and keeps the client's token
// only in the record. The key's real mark is left as it was.
const bypassPrefix = "\x00broken-bypass/"

func (s *server) put(w http.ResponseWriter, r *http.Request) {
	key := r.PathValue("key")
	var token, seq uint64
	var err error
	if raw := r.Header.Get(wire.HeaderToken); raw != "" || s.mode&MissingAsZero == 0 {
		if token, err = fence.ParseToken(raw); err != nil {
			fence.WriteError(w, err)
			return
		}
	}
	if raw := r.Header.Get(wire.HeaderSequence); raw != "" {
		if seq, err = fence.ParseSequence(raw); err != nil {
			fence.WriteError(w, err)
			return
		}
	}
	if token != 0 && s.mode&ForgetOnRestart == 0 {
		// A token was sent and marks are durable: the real fence applies.
		s.real.ServeHTTP(w, r)
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, fence.MaxBodyBytes))
	if err != nil {
		fence.WriteError(w, err)
		return
	}

	s.mu.Lock()
	defer s.mu.Unlock()
	mem := s.memMarks[key]
	if token != 0 && !mem.Admits(token, seq) {
		fence.WriteError(w, &fence.StaleError{Key: key, Token: token, Seq: seq, HighWater: mem.Token, HighSeq: mem.Seq})
		return
	}
	m := fence.Mark{Token: token, Seq: seq}
	if err := s.writeUnfenced(key, encodeRecord(m, body)); err != nil {
		fence.WriteError(w, err)
		return
	}
	if token != 0 {
		s.memMarks[key] = m
	}
	writeJSON(w, resource.MarkResponse{Key: key, Token: token, Seq: seq})
}

// highWater answers with the mark the broken server enforces: its memory's.
func (s *server) highWater(w http.ResponseWriter, r *http.Request) {
	key := r.PathValue("key")
	s.mu.Lock()
	m := s.memMarks[key]
	s.mu.Unlock()
	writeJSON(w, resource.MarkResponse{Key: key, Token: m.Token, Seq: m.Seq})
}

// writeUnfenced stores rec under key past the store's fence. s.mu is held,
// so the counter read and the write cannot interleave with another.
func (s *server) writeUnfenced(key string, rec []byte) error {
	scope := bypassPrefix + key
	hw, err := s.store.HighWater(scope)
	if err != nil {
		return err
	}
	return s.store.Update(scope, hw.Token+1, func(tx *fence.Tx) error {
		return tx.Put(key, rec)
	})
}

// encodeRecord writes a value as the real resource stores it (its record.go):
// the mark, big-endian, then the value. The tests read it back through the
// real server, so a change there fails them.
func encodeRecord(m fence.Mark, value []byte) []byte {
	b := make([]byte, 16, 16+len(value))
	binary.BigEndian.PutUint64(b[:8], m.Token)
	binary.BigEndian.PutUint64(b[8:16], m.Seq)
	return append(b, value...)
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}
