package api

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/fencer-io/fencer/api/wire"
	"github.com/fencer-io/fencer/coord"
	"github.com/fencer-io/fencer/fsm"
	"github.com/fencer-io/fencer/fsm/entry"
	"github.com/fencer-io/fencer/internal/acl"
)

func (f *fakeCluster) History(_ context.Context, lock string, n int, _ bool) ([]entry.GrantRecord, uint64, error) {
	f.calls = append(f.calls, "history")
	if f.err != nil {
		return nil, 0, f.err
	}
	grants, index := f.state.GrantHistory(lock, n)
	return grants, index, nil
}
func (f *fakeCluster) SemaphoreHistory(_ context.Context, sem string, n int, _ bool) ([]entry.GrantRecord, uint64, error) {
	f.calls = append(f.calls, "semaphore history")
	permits, index := f.state.PermitHistory(sem, n)
	return permits, index, nil
}
func (f *fakeCluster) Grant(_ context.Context, token uint64, _ bool) (entry.GrantRecord, uint64, error) {
	f.calls = append(f.calls, "grant")
	g, why := f.state.GrantOf(token)
	if why != fsm.TokenFound {
		return g, 9, &coord.TokenError{Token: token, Lookup: why}
	}
	return g, 9, nil
}

// WaitLock waits on the fake's event history when it has one (the watch
// tests), else answers at once.
func (f *fakeCluster) WaitLock(ctx context.Context, lock string, index uint64, wait time.Duration, until <-chan struct{}) (bool, error) {
	if f.events != nil {
		return f.events.WaitLock(ctx, lock, index, wait, nil, until)
	}
	return true, f.call("wait")
}
func (f *fakeCluster) AppliedIndex() uint64 { return 9 }

// historyState: lock a granted at 2, released at 3, granted again at 4
// (held); lock b granted at 5; a permit of semaphore jobs.s granted at 6,
// released at 7; one of semaphore s at 8 (held); history kept, permits
// too, from index 1.
func historyState(t *testing.T) *fsm.FSM {
	s := fsm.New(nil)
	for i, c := range []entry.Command{
		&entry.SetGrantHistory{GrantHistorySettings: entry.GrantHistorySettings{PerLock: 16, Global: 100, Permits: true}},
		&entry.Acquire{Lock: "a", Holder: "w1", Lease: "s", TTLMillis: 1000},
		&entry.Release{Lock: "a", Token: 2, Lease: "s"},
		&entry.Acquire{Lock: "a", Holder: "w2", Lease: "s", TTLMillis: 1000},
		&entry.Acquire{Lock: "jobs.b", Holder: "w3", Lease: "s", TTLMillis: 1000},
		&entry.SemAcquire{Semaphore: "jobs.s", Holder: "w4", Lease: "s", TTLMillis: 1000, Limit: 2},
		&entry.SemRelease{Semaphore: "jobs.s", Token: 6, Lease: "s"},
		&entry.SemAcquire{Semaphore: "s", Holder: "w5", Lease: "s", TTLMillis: 1000, Limit: 2},
	} {
		if err, ok := s.ApplyCommand(c, uint64(i+1)).(error); ok {
			t.Fatal(err)
		}
	}
	return s
}

func TestLockHistoryAndTokens(t *testing.T) {
	f := &fakeCluster{leader: true, state: historyState(t)}
	h := newFakeServer(f).Handler()
	get := func(path string, out any) (int, wire.Error, string) {
		t.Helper()
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("GET", path, nil))
		var e wire.Error
		if rec.Code >= 400 {
			json.Unmarshal(rec.Body.Bytes(), &e)
		} else if err := json.Unmarshal(rec.Body.Bytes(), out); err != nil {
			t.Fatalf("%s: %v %s", path, err, rec.Body)
		}
		return rec.Code, e, rec.Header().Get(wire.HeaderIndex)
	}
	var hist wire.LockHistory
	status, _, index := get("/v1/locks/a/history", &hist)
	want := wire.LockHistory{Lock: "a", Grants: []wire.GrantRecord{
		{Token: 4, Lock: "a", Holder: "w2", GrantedIndex: 4, Ended: wire.GrantHeld},
		{Token: 2, Lock: "a", Holder: "w1", GrantedIndex: 2, Ended: "released", EndedIndex: 3},
	}}
	if status != 200 || index != "8" || !reflect.DeepEqual(hist, want) {
		t.Fatalf("history: %d (index %s) %+v", status, index, hist)
	}
	if status, _, _ := get("/v1/locks/a/history?limit=1", &hist); status != 200 || len(hist.Grants) != 1 || hist.Grants[0].Token != 4 {
		t.Fatalf("limit 1: %d %+v", status, hist)
	}
	if status, _, _ := get("/v1/locks/never/history", &hist); status != 200 || hist.Grants == nil || len(hist.Grants) != 0 {
		t.Fatalf("a lock never granted: %d %+v", status, hist)
	}
	var g wire.GrantRecord
	if status, _, index := get("/v1/tokens/2", &g); status != 200 || index != "9" || !reflect.DeepEqual(g, want.Grants[1]) {
		t.Fatalf("token 2: %d %+v", status, g)
	}
	for _, c := range []struct {
		path, code, reason string
		status             int
	}{
		{"/v1/tokens/3", wire.CodeUnknownToken, wire.ReasonNeverGranted, 404},
		{"/v1/tokens/99", wire.CodeUnknownToken, wire.ReasonNeverGranted, 404},
		{"/v1/tokens/x", wire.CodeInvalidToken, "", 400},
		{"/v1/tokens/0", wire.CodeInvalidToken, "", 400},
		{"/v1/locks/a/history?limit=0", wire.CodeInvalidLimit, "", 400},
		{"/v1/locks/a/history?limit=1025", wire.CodeInvalidLimit, "", 400},
		{"/v1/locks/a/history?limit=x", wire.CodeInvalidLimit, "", 400},
	} {
		status, e, _ := get(c.path, nil)
		if status != c.status || e.Code != c.code || e.Reason != c.reason {
			t.Errorf("%s: %d %+v, want %d %s %s", c.path, status, e, c.status, c.code, c.reason)
		}
	}
	// A permit's token names its semaphore (the lock is ""), and the
	// semaphore's history lists it; the lock of the same name has none.
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/v1/tokens/6", nil))
	if body := rec.Body.String(); rec.Code != 200 || !strings.Contains(body, `"lock":"","semaphore":"jobs.s","holder":"w4"`) {
		t.Fatalf("a permit's token: %d %s", rec.Code, body)
	}
	permit := wire.GrantRecord{Token: 6, Semaphore: "jobs.s", Holder: "w4", GrantedIndex: 6, Ended: "released", EndedIndex: 7}
	if status, _, _ := get("/v1/tokens/6", &g); status != 200 || !reflect.DeepEqual(g, permit) {
		t.Fatalf("token 6: %d %+v", status, g)
	}
	var semHist wire.SemaphoreHistory
	status, _, index = get("/v1/semaphores/jobs.s/history", &semHist)
	if status != 200 || index != "8" || !reflect.DeepEqual(semHist, wire.SemaphoreHistory{Semaphore: "jobs.s", Grants: []wire.GrantRecord{permit}}) {
		t.Fatalf("semaphore history: %d (index %s) %+v", status, index, semHist)
	}
	if status, _, _ := get("/v1/semaphores/s/history?limit=1", &semHist); status != 200 || len(semHist.Grants) != 1 || semHist.Grants[0].Ended != wire.GrantHeld {
		t.Fatalf("semaphore s: %d %+v", status, semHist)
	}
	if status, _, _ := get("/v1/locks/jobs.s/history", &hist); status != 200 || len(hist.Grants) != 0 {
		t.Fatalf("the lock jobs.s: %d %+v", status, hist)
	}
	if status, e, _ := get("/v1/semaphores/s/history?limit=0", nil); status != 400 || e.Code != wire.CodeInvalidLimit {
		t.Fatalf("limit 0: %d %+v", status, e)
	}
	// A cluster whose history records no permits (its members read an
	// older log format) says a permit's token may be one: not_kept.
	f.state = fsm.New(nil)
	for i, c := range []entry.Command{
		&entry.SetGrantHistory{GrantHistorySettings: entry.GrantHistorySettings{PerLock: 16, Global: 100}},
		&entry.SemAcquire{Semaphore: "s", Holder: "w", Lease: "s", TTLMillis: 1000, Limit: 2},
	} {
		f.state.ApplyCommand(c, uint64(i+1))
	}
	if status, e, _ := get("/v1/tokens/2", nil); status != 404 || e.Code != wire.CodeUnknownToken || e.Reason != wire.ReasonNotKept {
		t.Fatalf("a permit without permits recorded: %d %+v", status, e)
	}
	// Without a history: a token not kept, said so.
	f.state = fsm.New(nil)
	f.state.ApplyCommand(&entry.Acquire{Lock: "a", Holder: "w1", Lease: "s", TTLMillis: 1000}, 1)
	if status, e, _ := get("/v1/tokens/1", nil); status != 404 || e.Reason != wire.ReasonNoHistory {
		t.Fatalf("no history: %d %+v", status, e)
	}
}

// A principal limited to a prefix reads the history and tokens of its
// locks only: another lock's history is 403, as its status is, and so is
// the grant of another lock's token.
func TestHistoryScopedByPrefix(t *testing.T) {
	a, err := acl.Parse([]byte(`{"tokens":[{"name":"ci","secret":"scoped-secret-0123456789","role":"client","locks":["jobs."],"keys":["*"]}]}`))
	if err != nil {
		t.Fatal(err)
	}
	f := &fakeCluster{leader: true, state: historyState(t)}
	h := acl.Middleware(acl.NewStore(a))(newFakeServer(f).Handler())
	auth := map[string]string{"Authorization": "Bearer scoped-secret-0123456789"}
	for path, want := range map[string]int{
		"/v1/locks/jobs.b/history": 200,
		"/v1/locks/a/history":      403,
		"/v1/tokens/5":             200,
		"/v1/tokens/4":             403,
		"/v1/tokens/3":             404,
		// Semaphores follow the same prefixes.
		"/v1/semaphores/jobs.s/history": 200,
		"/v1/semaphores/s/history":      403,
		"/v1/tokens/6":                  200,
		"/v1/tokens/8":                  403,
	} {
		if status, e, _ := do(t, h, call{"GET", path, "", auth}); status != want {
			t.Errorf("%s: %d %+v, want %d", path, status, e, want)
		}
	}
}

// A blocking read's parameters are checked before any wait; a good one
// waits, then reads, and says the index it read at.
func TestBlockingReadParameters(t *testing.T) {
	f := &fakeCluster{leader: true}
	h := newFakeServer(f).Handler()
	for path, code := range map[string]string{
		"/v1/locks/a?wait=30s":               wire.CodeInvalidWait,
		"/v1/locks/a?wait_index=x":           wire.CodeInvalidIndex,
		"/v1/locks/a?wait_index=-1":          wire.CodeInvalidIndex,
		"/v1/locks/a?wait_index=3&wait=x":    wire.CodeInvalidWait,
		"/v1/locks/a?wait_index=3&wait=-1s":  wire.CodeInvalidWait,
		"/v1/locks/a?wait_index=3&wait=5m1s": wire.CodeInvalidWait,
		"/v1/locks/a?wait_index=3&wait=3000": wire.CodeInvalidWait,
	} {
		f.calls = nil
		if status, e, _ := do(t, h, call{"GET", path, "", nil}); status != 400 || e.Code != code || len(f.calls) != 0 {
			t.Errorf("%s: %d %s, reached %v; want 400 %s", path, status, e.Code, f.calls, code)
		}
	}
	f.calls = nil
	status, _, hdr := do(t, h, call{"GET", "/v1/locks/a?wait_index=3&wait=5m", "", nil})
	if status != 200 || !reflect.DeepEqual(f.calls, []string{"wait", "lock"}) || hdr.Get(wire.HeaderIndex) != "9" {
		t.Fatalf("blocking read: %d, calls %v, index %q", status, f.calls, hdr.Get(wire.HeaderIndex))
	}
}
