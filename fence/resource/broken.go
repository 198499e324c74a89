package resource

import (
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/fencer-io/fencer/api/wire"
	"github.com/fencer-io/fencer/fence"
)

// BrokenFence selects deliberate fencing bugs. It exists only as the
// negative control of chaos tests: a checker that cannot see these servers
// corrupt data cannot be trusted to see a correct one not do so. Never use
// it outside tests.
type BrokenFence uint

const (
	// BrokenMissingAsZero treats a missing Fencing-Token as token 0 and
	// skips the check for it: the compatibility shim that lets a client
	// which dropped the header overwrite anything.
	BrokenMissingAsZero BrokenFence = 1 << iota

	// BrokenForgetOnRestart keeps high-water marks only in memory, so a new
	// server over the same store (a restart) accepts tokens older than ones
	// it already accepted. Values are still stored durably.
	BrokenForgetOnRestart
)

var brokenNames = []struct {
	name string
	bit  BrokenFence
}{
	{"missing-as-zero", BrokenMissingAsZero},
	{"forget-on-restart", BrokenForgetOnRestart},
}

// ParseBrokenFence parses a comma-separated list of broken modes
// ("missing-as-zero", "forget-on-restart"); "" means none. Test-only.
func ParseBrokenFence(s string) (BrokenFence, error) {
	var b BrokenFence
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		found := false
		for _, n := range brokenNames {
			if n.name == f {
				b |= n.bit
				found = true
			}
		}
		if !found {
			return 0, fmt.Errorf("resource: unknown broken fence mode %q", f)
		}
	}
	return b, nil
}

// WithBrokenFence makes NewServer build a deliberately broken server; see
// BrokenFence. Test-only.
func WithBrokenFence(b BrokenFence) Option {
	return func(s *Server) { s.broken = b }
}

// bypassPrefix names the fence scopes a broken server writes through. The
// store always fences, so a broken server bypasses it by fencing its writes
// with its own counter on a scope nobody else uses, and keeps the client's
// token only in the record. The key's real mark is left as it was.
const bypassPrefix = "\x00broken-bypass/"

// putDataBroken is putData behind a broken fence.
func (s *Server) putDataBroken(w http.ResponseWriter, r *http.Request) {
	key := keyParam(r)
	var token, seq uint64
	var err error
	if raw := r.Header.Get(wire.HeaderToken); raw != "" || s.broken&BrokenMissingAsZero == 0 {
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
	if token != 0 && s.broken&BrokenForgetOnRestart == 0 {
		// A token was sent and marks are durable: the real fence applies.
		fence.Middleware(s.store, keyParam)(http.HandlerFunc(s.putData)).ServeHTTP(w, r)
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
	writeJSON(w, http.StatusOK, MarkResponse{Key: key, Token: token, Seq: seq})
}

// writeUnfenced stores rec under key past the store's fence. s.mu is held,
// so the counter read and the write cannot interleave with another.
func (s *Server) writeUnfenced(key string, rec []byte) error {
	scope := bypassPrefix + key
	hw, err := s.store.HighWater(scope)
	if err != nil {
		return err
	}
	return s.store.Update(scope, hw.Token+1, func(tx *fence.Tx) error {
		return tx.Put(key, rec)
	})
}
