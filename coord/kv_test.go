package coord

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/fencer-io/fencer/fsm/entry"
	"github.com/fencer-io/fencer/fsm/refusal"
)

// setFormat makes the fake cluster's members read format, as their records
// would say in a rolling upgrade.
func setFormat(f *fakeRaft, format int) {
	f.mu.Lock()
	f.format = format
	f.mu.Unlock()
}

// A token above every token granted is refused by the leader before it
// proposes, in every log format: with members on an older build, whose put
// entries lack the FSM's rule, this is what keeps the mark from being set.
func TestPutRefusesUnissuedTokenWithoutAnEntry(t *testing.T) {
	for format := entry.LogFormatJSON; format <= entry.LogFormat; format++ {
		s, f, _ := newTestService(t, Config{})
		setFormat(f, format)
		g := mustAcquire(t, s, "report-lock", "a", time.Minute)
		entries := len(f.log())
		for _, token := range []uint64{g.Token + 1, math.MaxUint64} {
			_, err := s.Put(bg, PutRequest{Key: "report", Value: []byte("x"), Token: token})
			if !errors.Is(err, refusal.ErrUnissuedToken) {
				t.Fatalf("format %d, token %d (last granted %d): %v, want unissued", format, token, g.Token, err)
			}
		}
		if len(f.log()) != entries {
			t.Fatalf("format %d: a refused put wrote the log", format)
		}
		// The real holder still writes.
		if _, err := s.Put(bg, PutRequest{Key: "report", Value: []byte("x"), Token: g.Token}); err != nil {
			t.Fatalf("format %d: the holder's put: %v", format, err)
		}
	}
}

// The store's limits refuse with kv_full before anything is proposed; an
// overwrite counts the difference, a delete frees its space, and a write by
// another principal moves the key's bytes to it.
func TestKVLimits(t *testing.T) {
	s, f, _ := newTestService(t, Config{MaxKeys: 3, MaxKVBytes: 20, MaxKVBytesPerPrincipal: 8})
	grants := 0
	put := func(key string, n int, principal string) error {
		// Each write under a new grant, so that only the limits refuse.
		grants++
		g := mustAcquire(t, s, fmt.Sprintf("l%d", grants), "a", time.Minute)
		_, err := s.Put(bg, PutRequest{Key: key, Value: []byte(strings.Repeat("v", n)), Token: g.Token, Principal: principal})
		return err
	}
	ok := func(what string, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	full := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, ErrKVFull) {
			t.Fatalf("%s: %v, want kv_full", what, err)
		}
	}
	ok("ci's first key", put("a", 8, "ci"))
	full("ci past its share", put("b", 1, "ci"))
	ok("an overwrite with less frees ci's bytes", put("a", 3, "ci"))
	ok("ci within its share again", put("b", 5, "ci"))
	ok("ops's key", put("c", 8, "ops"))
	full("a fourth key", put("d", 0, ""))
	entries := len(f.log())
	full("past the total", put("c", 8+5, ""))
	if len(f.log()) != entries+1 { // the acquire only
		t.Fatal("a refused put wrote the log")
	}
	ok("an overwrite counts the difference: 20 of 20", put("c", 8+4, ""))
	ok("ops's key again", put("c", 8, "ops"))
	// ops's key, overwritten by ci, would be ci's: 3+5+8 is past its share.
	full("ci taking over ops's key", put("c", 8, "ci"))
	if _, err := s.DeleteKey(bg, "a"); err != nil {
		t.Fatal(err)
	}
	ok("after a delete freed a key and ci's bytes", put("d", 3, "ci"))
	if c := f.fsm.Counts(); c.Keys != 3 || c.KVBytes != 5+8+3 {
		t.Fatalf("counts %+v", c)
	}
}

// Until every member reads LogFormatPrincipal a key delete cannot be
// written: refused with entry.ErrFormatTooOld (409 upgrade_required), nothing
// proposed.
func TestDeleteKeyWaitsForTheFormat(t *testing.T) {
	s, f, _ := newTestService(t, Config{})
	g := mustAcquire(t, s, "l", "a", time.Minute)
	if _, err := s.Put(bg, PutRequest{Key: "k", Value: []byte("v"), Token: g.Token}); err != nil {
		t.Fatal(err)
	}
	setFormat(f, entry.LogFormatBinary)
	entries := len(f.log())
	if _, err := s.DeleteKey(bg, "k"); !errors.Is(err, entry.ErrFormatTooOld) || len(f.log()) != entries {
		t.Fatalf("delete with a member on an older build: %v", err)
	}
	setFormat(f, entry.LogFormat)
	res, err := s.DeleteKey(bg, "k")
	if err != nil || res.LastToken != g.Token {
		t.Fatalf("delete: %+v %v", res, err)
	}
	if _, err := s.DeleteKey(bg, "k"); !errors.Is(err, refusal.ErrNoSuchKey) {
		t.Fatalf("second delete: %v", err)
	}
}

// A request id is its principal's: another principal replaying holder and
// request id is refused as anyone would be, not handed the grant and its
// secret, whatever the log format: until every member reads
// LogFormatPrincipal the entries carry no principal, and the request id
// they carry is derived from both (the caller still sees its own). Fails at
// the older format with the derivation removed: bob is handed alice's grant.
func TestRequestIDBoundToPrincipal(t *testing.T) {
	for _, format := range []int{entry.LogFormatBinary, entry.LogFormat} {
		s, f, _ := newTestService(t, Config{})
		setFormat(f, format)
		req := AcquireRequest{Lock: "jobs.a", Holder: "w", TTL: time.Minute, RequestID: "0123456789abcdef", Principal: "alice"}
		first, err := s.Acquire(bg, req)
		if err != nil {
			t.Fatal(err)
		}
		if first.Grant.RequestID != req.RequestID {
			t.Fatalf("format %d: alice is answered request id %q, asked %q", format, first.Grant.RequestID, req.RequestID)
		}
		if again, err := s.Acquire(bg, req); err != nil || !again.Existing || again.Grant.Lease != first.Grant.Lease || again.Grant.RequestID != req.RequestID {
			t.Fatalf("format %d: alice's retry: %+v %v", format, again, err)
		}
		bob := req
		bob.Principal = "bob"
		res, err := s.Acquire(bg, bob)
		var held *refusal.HeldError
		if !errors.As(err, &held) || res.Grant.Lease != "" {
			t.Fatalf("format %d: bob replaying alice's request: %+v %v, want lock held", format, res, err)
		}
	}
}
