package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/fencer-io/fencer/api/wire"
	"github.com/fencer-io/fencer/cluster"
	"github.com/fencer-io/fencer/coord"
	"github.com/fencer-io/fencer/coord/events"
	"github.com/fencer-io/fencer/fsm"
	"github.com/fencer-io/fencer/fsm/entry"
	"github.com/fencer-io/fencer/fsm/refusal"
	"github.com/fencer-io/fencer/fsm/snapshot"
)

// fakeCluster is a leader that answers every call with err (when set) and
// records what reached it, so tests can assert that refused input never does.
type fakeCluster struct {
	err    error
	calls  []string
	leader bool
	locks  []coord.LockStatus
	// principal is the one the last acquire or put carried.
	principal string
	// ttl is the lease length the last lock or semaphore acquire asked for.
	ttl    time.Duration
	events *events.History // fed directly by tests of the event stream
	state  *fsm.FSM        // answers the grant history (history_test.go)
}

func (f *fakeCluster) ID() string                     { return "n1" }
func (f *fakeCluster) IsLeader() bool                 { return f.leader }
func (f *fakeCluster) Leader() (string, string)       { return "", "" }
func (f *fakeCluster) LeaderChanged() <-chan struct{} { return nil }
func (f *fakeCluster) Ready() (int, error) {
	if !f.leader {
		return 0, cluster.ErrNoLeader
	}
	return entry.LogFormat, nil
}
func (f *fakeCluster) Digest() (uint64, string)       { return 1, "d" }
func (f *fakeCluster) Registry() *prometheus.Registry { return prometheus.NewRegistry() }
func (f *fakeCluster) Status() (wire.ClusterStatus, error) {
	return wire.ClusterStatus{Node: "n1"}, f.err
}

func (f *fakeCluster) MemberStatuses(context.Context) (wire.MemberStatusList, error) {
	return wire.MemberStatusList{Node: "n1", Members: []wire.MemberStatus{{Member: wire.Member{ID: "n1", Voter: true, Leader: true}, State: "Leader", Term: 2, SeesLeader: "n1"}}}, f.err
}

func (f *fakeCluster) call(name string) error {
	f.calls = append(f.calls, name)
	return f.err
}

func (f *fakeCluster) Acquire(_ context.Context, req coord.AcquireRequest) (fsm.AcquireResult, error) {
	f.principal, f.ttl = req.Principal, req.TTL
	return fsm.AcquireResult{Grant: entry.Lock{Name: req.Lock, Holder: req.Holder, Token: 7, Lease: strings.Repeat("a", 32), TTLMillis: req.TTL.Milliseconds()}}, f.call("acquire")
}
func (f *fakeCluster) Renew(_ context.Context, name string, token uint64, _ string) (entry.Lock, error) {
	return entry.Lock{Name: name, Token: token, TTLMillis: 1000}, f.call("renew")
}
func (f *fakeCluster) Release(context.Context, string, uint64, string) error {
	return f.call("release")
}
func (f *fakeCluster) Lock(_ context.Context, name string, _ bool) (coord.LockStatus, error) {
	return coord.LockStatus{Lock: entry.Lock{Name: name}}, f.call("lock")
}
func (f *fakeCluster) Locks(context.Context, bool) (iter.Seq[coord.LockStatus], uint64, error) {
	return slices.Values(f.locks), 3, f.call("locks")
}
func (f *fakeCluster) Check(context.Context, string, uint64, bool) (coord.CheckResult, error) {
	return coord.CheckResult{Current: true, Token: 7}, f.call("check")
}
func (f *fakeCluster) Put(_ context.Context, req coord.PutRequest) (uint64, error) {
	f.principal = req.Principal
	return req.Token, f.call("put")
}
func (f *fakeCluster) DeleteKey(_ context.Context, key string) (fsm.DeleteKeyResult, error) {
	return fsm.DeleteKeyResult{Key: key, LastToken: 9}, f.call("delete-key")
}
func (f *fakeCluster) Get(context.Context, string, bool) (entry.FencedKey, bool, uint64, error) {
	return entry.FencedKey{}, false, 3, f.call("get")
}
func (f *fakeCluster) Watch(since int64) (*events.Watcher, error) {
	if f.events == nil {
		f.events = events.New(events.Config{})
	}
	return f.events.Watch(since)
}
func (f *fakeCluster) Proclaim(_ context.Context, name string, token uint64, _, value string) (entry.Lock, error) {
	return entry.Lock{Name: name, Token: token, Value: value}, f.call("proclaim")
}
func (f *fakeCluster) AcquirePermit(_ context.Context, req coord.PermitRequest) (fsm.PermitResult, error) {
	f.ttl = req.TTL
	return fsm.PermitResult{Permit: entry.Permit{Semaphore: req.Semaphore, Holder: req.Holder, Token: 7, Limit: req.Limit}, Held: 1}, f.call("sem-acquire")
}
func (f *fakeCluster) RenewPermit(context.Context, string, uint64, string) (entry.Permit, error) {
	return entry.Permit{}, f.call("sem-renew")
}
func (f *fakeCluster) ReleasePermit(context.Context, string, uint64, string) error {
	return f.call("sem-release")
}
func (f *fakeCluster) Semaphore(_ context.Context, name string, _ bool) (coord.SemaphoreStatus, error) {
	return coord.SemaphoreStatus{Name: name}, f.call("semaphore")
}
func (f *fakeCluster) Semaphores(context.Context, bool) ([]coord.SemaphoreStatus, error) {
	return nil, f.call("semaphores")
}
func (f *fakeCluster) CheckPermit(context.Context, string, uint64, bool) (bool, error) {
	return true, f.call("sem-check")
}
func (f *fakeCluster) CreateSession(context.Context, coord.SessionRequest) (fsm.SessionResult, error) {
	return fsm.SessionResult{}, f.call("session-create")
}
func (f *fakeCluster) RenewSession(context.Context, uint64, string) (entry.Session, error) {
	return entry.Session{}, f.call("session-renew")
}
func (f *fakeCluster) CloseSession(context.Context, uint64, string) ([]fsm.SessionGrant, error) {
	return nil, f.call("session-close")
}
func (f *fakeCluster) Session(_ context.Context, id uint64, _ bool) (coord.SessionStatus, error) {
	return coord.SessionStatus{}, f.call("session")
}
func (f *fakeCluster) Sessions(context.Context, bool) ([]coord.SessionStatus, error) {
	return nil, f.call("sessions")
}
func (f *fakeCluster) MultiAcquire(_ context.Context, req coord.MultiAcquireRequest) (fsm.MultiResult, error) {
	return fsm.MultiResult{Grant: fsm.MultiGrant{Names: req.Names, Holder: req.Holder, Token: 9}}, f.call("multi-acquire")
}
func (f *fakeCluster) RenewMulti(context.Context, uint64, string) (fsm.MultiGrant, error) {
	return fsm.MultiGrant{}, f.call("multi-renew")
}
func (f *fakeCluster) ReleaseMulti(context.Context, uint64, string) (fsm.MultiGrant, error) {
	return fsm.MultiGrant{}, f.call("multi-release")
}
func (f *fakeCluster) MultiGrant(uint64) (fsm.MultiGrant, bool) { return fsm.MultiGrant{}, false }
func (f *fakeCluster) Revoke(context.Context, string, uint64) (fsm.ReleaseResult, error) {
	return fsm.ReleaseResult{}, f.call("revoke")
}
func (f *fakeCluster) RevokePermit(context.Context, string, uint64) (fsm.SemReleaseResult, error) {
	return fsm.SemReleaseResult{}, f.call("sem-revoke")
}
func (f *fakeCluster) RevokeSession(context.Context, uint64) (entry.Session, []fsm.SessionGrant, error) {
	return entry.Session{}, nil, f.call("session-revoke")
}
func (f *fakeCluster) Join(context.Context, wire.JoinRequest) error { return f.call("join") }
func (f *fakeCluster) Backup(context.Context, io.Writer) (snapshot.Header, error) {
	return snapshot.Header{}, f.call("backup")
}
func (f *fakeCluster) Restore(context.Context, io.Reader, cluster.RestoreOptions) (snapshot.Header, error) {
	return snapshot.Header{}, f.call("restore")
}
func (f *fakeCluster) RemoveMember(context.Context, string) error { return f.call("remove") }
func (f *fakeCluster) TransferLeadership(context.Context, string) error {
	return f.call("transfer")
}

type call struct {
	method, path, body string
	headers            map[string]string
}

func do(t *testing.T, h http.Handler, c call) (int, wire.Error, http.Header) {
	t.Helper()
	req := httptest.NewRequest(c.method, c.path, strings.NewReader(c.body))
	if c.body != "" {
		req.Header.Set("Content-Type", "application/json") // headers may say otherwise
	}
	for k, v := range c.headers {
		req.Header.Set(k, v)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	var e wire.Error
	body, _ := io.ReadAll(rec.Body)
	if rec.Code >= 400 {
		if err := json.Unmarshal(body, &e); err != nil {
			t.Fatalf("%s %s: error body %q is not JSON: %v", c.method, c.path, body, err)
		}
		if e.Code == "" || e.Message == "" {
			t.Fatalf("%s %s: error body %q lacks code or message", c.method, c.path, body)
		}
	}
	return rec.Code, e, rec.Header()
}

const lease = `"lease":"0123456789abcdef0123456789abcdef"`

// Bad input is refused with 400 and a precise code, and never reaches the
// cluster.
func TestBadInputRefusedBeforeTheCluster(t *testing.T) {
	long := strings.Repeat("x", 201)
	cases := []struct {
		name string
		call call
		code string
	}{
		{"bad name", call{"POST", "/v1/locks/bad%20name/acquire", `{"holder":"w"}`, nil}, wire.CodeInvalidName},
		{"long name", call{"POST", "/v1/locks/" + long + "/acquire", `{"holder":"w"}`, nil}, wire.CodeInvalidName},
		{"malformed json", call{"POST", "/v1/locks/a/acquire", `{"holder":`, nil}, wire.CodeInvalidJSON},
		{"empty body", call{"POST", "/v1/locks/a/acquire", ``, map[string]string{"Content-Type": "application/json"}}, wire.CodeInvalidJSON},
		{"unknown field", call{"POST", "/v1/locks/a/acquire", `{"holder":"w","tll_ms":5}`, nil}, wire.CodeInvalidJSON},
		{"trailing data", call{"POST", "/v1/locks/a/acquire", `{"holder":"w"} {}`, nil}, wire.CodeInvalidJSON},
		{"wrong type", call{"POST", "/v1/locks/a/acquire", `{"holder":"w","ttl_ms":"10"}`, nil}, wire.CodeInvalidJSON},
		{"no holder", call{"POST", "/v1/locks/a/acquire", `{"ttl_ms":1000}`, nil}, wire.CodeInvalidHolder},
		{"control char holder", call{"POST", "/v1/locks/a/acquire", `{"holder":"a\u0001"}`, nil}, wire.CodeInvalidHolder},
		// Values refuse what holders refuse (issue 26 F13).
		{"NUL in a value", call{"POST", "/v1/locks/a/acquire", `{"holder":"w","value":"10.0.0.1\u0000:80"}`, nil}, wire.CodeInvalidValue},
		{"bidi override in a value", call{"POST", "/v1/locks/a/acquire", `{"holder":"w","value":"evil\u202e08:1.0.0.01"}`, nil}, wire.CodeInvalidValue},
		{"zero-width in a proclaimed value", call{"POST", "/v1/locks/a/value", `{` + lease + `,"token":3,"value":"a\u200bb"}`, nil}, wire.CodeInvalidValue},
		{"ttl too short", call{"POST", "/v1/locks/a/acquire", `{"holder":"w","ttl_ms":99}`, nil}, wire.CodeInvalidTTL},
		{"ttl too long", call{"POST", "/v1/locks/a/acquire", `{"holder":"w","ttl_ms":86400001}`, nil}, wire.CodeInvalidTTL},
		{"ttl overflowing a Duration", call{"POST", "/v1/locks/a/acquire", `{"holder":"w","ttl_ms":288230376151721744}`, nil}, wire.CodeInvalidTTL},
		{"negative ttl", call{"POST", "/v1/locks/a/acquire", `{"holder":"w","ttl_ms":-5}`, nil}, wire.CodeInvalidTTL},
		{"wait too long", call{"POST", "/v1/locks/a/acquire", `{"holder":"w","wait_ms":60001}`, nil}, wire.CodeInvalidWait},
		{"negative wait", call{"POST", "/v1/locks/a/acquire", `{"holder":"w","wait_ms":-1}`, nil}, wire.CodeInvalidWait},
		{"long request id", call{"POST", "/v1/locks/a/acquire", `{"holder":"w","request_id":"` + long + `"}`, nil}, wire.CodeInvalidRequestID},
		// Short enough to guess another caller's (issue 13).
		{"short request id", call{"POST", "/v1/locks/a/acquire", `{"holder":"w","request_id":"r-123456789abcd"}`, nil}, wire.CodeInvalidRequestID},
		{"short in characters", call{"POST", "/v1/locks/a/acquire", `{"holder":"w","request_id":"ééééééééééééééé"}`, nil}, wire.CodeInvalidRequestID},
		{"renew bad lease", call{"POST", "/v1/locks/a/renew", `{"lease":"short","token":3}`, nil}, wire.CodeInvalidLease},
		{"renew no token", call{"POST", "/v1/locks/a/renew", `{` + lease + `}`, nil}, wire.CodeInvalidToken},
		{"release bad name", call{"POST", "/v1/locks/a$b/release", `{` + lease + `,"token":3}`, nil}, wire.CodeInvalidName},
		{"release unknown field", call{"POST", "/v1/locks/a/release", `{` + lease + `,"token":3,"x":1}`, nil}, wire.CodeInvalidJSON},
		{"check no token", call{"GET", "/v1/locks/a/check", ``, nil}, wire.CodeInvalidToken},
		{"check bad token", call{"GET", "/v1/locks/a/check?token=-1", ``, nil}, wire.CodeInvalidToken},
		{"check zero token", call{"GET", "/v1/locks/a/check?token=0", ``, nil}, wire.CodeInvalidToken},
		{"get bad name", call{"GET", "/v1/locks/a%2Fb", ``, nil}, wire.CodeInvalidName},
		{"put bad key", call{"PUT", "/v1/kv/a%20b", `v`, map[string]string{"Fencing-Token": "5"}}, wire.CodeInvalidKey},
		{"put bad lock", call{"PUT", "/v1/kv/k", `v`, map[string]string{"Fencing-Token": "5", "Fencing-Lock": "a b"}}, wire.CodeInvalidName},
		{"join missing fields", call{"POST", "/v1/cluster/join", `{"id":"n9"}`, nil}, wire.CodeInvalidMember},
		// Multi-locks: their names, and what they do not do yet.
		{"multi no names", call{"POST", "/v1/locks/acquire", `{"holder":"w","names":[]}`, nil}, wire.CodeInvalidNames},
		{"multi names missing", call{"POST", "/v1/locks/acquire", `{"holder":"w"}`, nil}, wire.CodeInvalidNames},
		{"multi name twice", call{"POST", "/v1/locks/acquire", `{"holder":"w","names":["a","b","a"]}`, nil}, wire.CodeInvalidNames},
		{"multi bad name", call{"POST", "/v1/locks/acquire", `{"holder":"w","names":["a","b c"]}`, nil}, wire.CodeInvalidNames},
		{"multi 65 names", call{"POST", "/v1/locks/acquire", `{"holder":"w","names":[` + manyNames(65) + `]}`, nil}, wire.CodeInvalidNames},
		{"multi no holder", call{"POST", "/v1/locks/acquire", `{"names":["a"]}`, nil}, wire.CodeInvalidHolder},
		{"multi ttl too short", call{"POST", "/v1/locks/acquire", `{"holder":"w","names":["a"],"ttl_ms":5}`, nil}, wire.CodeInvalidTTL},
		{"multi wait", call{"POST", "/v1/locks/acquire", `{"holder":"w","names":["a"],"wait_ms":-1}`, nil}, wire.CodeInvalidWait},
		{"durable without a wait", call{"POST", "/v1/locks/a/acquire", `{"holder":"w","durable":true,"request_id":"0123456789abcdef"}`, nil}, wire.CodeInvalidWait},
		{"durable without a request id", call{"POST", "/v1/locks/a/acquire", `{"holder":"w","durable":true,"wait_ms":100}`, nil}, wire.CodeInvalidRequestID},
		{"durable permit without a request id", call{"POST", "/v1/semaphores/s/acquire", `{"holder":"w","limit":2,"durable":true,"wait_ms":100}`, nil}, wire.CodeInvalidRequestID},
		{"durable multi", call{"POST", "/v1/locks/acquire", `{"holder":"w","names":["a"],"durable":true,"request_id":"0123456789abcdef"}`, nil}, wire.CodeInvalidWait},
		{"multi bad mode", call{"POST", "/v1/locks/acquire", `{"holder":"w","names":["a"],"mode":"read"}`, nil}, wire.CodeInvalidMode},
		{"multi session", call{"POST", "/v1/locks/acquire", `{"holder":"w","names":["a"],"session":3,` + strings.Replace(lease, "lease", "session_lease", 1) + `}`, nil}, wire.CodeInvalidToken},
		{"multi renew no token", call{"POST", "/v1/locks/renew", `{` + lease + `}`, nil}, wire.CodeInvalidToken},
		{"multi release bad lease", call{"POST", "/v1/locks/release", `{"lease":"x","token":3}`, nil}, wire.CodeInvalidLease},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := &fakeCluster{leader: true}
			status, e, _ := do(t, newFakeServer(f).Handler(), tc.call)
			if status != http.StatusBadRequest || e.Code != tc.code {
				t.Fatalf("got %d %q (%s), want 400 %q", status, e.Code, e.Message, tc.code)
			}
			if len(f.calls) != 0 {
				t.Fatalf("refused input reached the cluster: %v", f.calls)
			}
		})
	}
}

// manyNames is n distinct lock names as JSON strings.
func manyNames(n int) string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%q", fmt.Sprint("n", i))
	}
	return strings.Join(out, ",")
}

// A multi-lock's routes beside a lock's: POST /v1/locks/acquire is the
// multi-acquire (64 names are fine), and a lock named acquire keeps its own
// routes.
func TestMultiLockRoutes(t *testing.T) {
	f := &fakeCluster{leader: true}
	h := newFakeServer(f).Handler()
	if status, e, _ := do(t, h, call{"POST", "/v1/locks/acquire", `{"holder":"w","names":[` + manyNames(64) + `]}`, nil}); status != http.StatusOK {
		t.Fatalf("multi-acquire of 64 names: %d %s", status, e.Message)
	}
	if status, e, _ := do(t, h, call{"POST", "/v1/locks/acquire/acquire", `{"holder":"w"}`, nil}); status != http.StatusOK {
		t.Fatalf("acquire of a lock named acquire: %d %s", status, e.Message)
	}
	if status, e, _ := do(t, h, call{"GET", "/v1/locks/acquire", ``, nil}); status != http.StatusOK {
		t.Fatalf("status of a lock named acquire: %d %s", status, e.Message)
	}
	if got := strings.Join(f.calls, " "); got != "multi-acquire acquire lock" {
		t.Fatalf("calls %q", got)
	}
}

// A missing token (or 0, never issued) fails closed with 428 missing_token, a
// malformed one with 400 invalid_token ("007" is a bad token, not no token);
// neither reaches the cluster.
func TestMissingTokenFailsClosed(t *testing.T) {
	for _, c := range []struct {
		hdr    http.Header
		status int
		code   string
	}{
		{nil, http.StatusPreconditionRequired, wire.CodeMissingToken},
		{http.Header{"Fencing-Token": {""}}, http.StatusPreconditionRequired, wire.CodeMissingToken},
		{http.Header{"Fencing-Token": {"0"}}, http.StatusPreconditionRequired, wire.CodeMissingToken},
		{http.Header{"Fencing-Token": {"00"}}, http.StatusBadRequest, wire.CodeInvalidToken},
		{http.Header{"Fencing-Token": {"007"}}, http.StatusBadRequest, wire.CodeInvalidToken},
		{http.Header{"Fencing-Token": {"-3"}}, http.StatusBadRequest, wire.CodeInvalidToken},
		{http.Header{"Fencing-Token": {"+3"}}, http.StatusBadRequest, wire.CodeInvalidToken},
		{http.Header{"Fencing-Token": {" 3"}}, http.StatusBadRequest, wire.CodeInvalidToken},
		{http.Header{"Fencing-Token": {"3.0"}}, http.StatusBadRequest, wire.CodeInvalidToken},
		{http.Header{"Fencing-Token": {"18446744073709551616"}}, http.StatusBadRequest, wire.CodeInvalidToken},
		{http.Header{"Fencing-Token": {"abc"}}, http.StatusBadRequest, wire.CodeInvalidToken},
		{http.Header{"Fencing-Token": {"3", "4"}}, http.StatusBadRequest, wire.CodeInvalidToken},
	} {
		f := &fakeCluster{leader: true}
		req := httptest.NewRequest("PUT", "/v1/kv/k", strings.NewReader("v"))
		for k, v := range c.hdr {
			req.Header[k] = v
		}
		rec := httptest.NewRecorder()
		newFakeServer(f).Handler().ServeHTTP(rec, req)
		var e wire.Error
		if err := json.Unmarshal(rec.Body.Bytes(), &e); err != nil || rec.Code != c.status || e.Code != c.code {
			t.Errorf("header %v: %d %s, want %d %s", c.hdr, rec.Code, rec.Body, c.status, c.code)
		}
		if len(f.calls) != 0 {
			t.Errorf("header %v reached the cluster", c.hdr)
		}
	}
	f := &fakeCluster{leader: true}
	status, e, _ := do(t, newFakeServer(f).Handler(), call{"PUT", "/v1/kv/k", "v", map[string]string{"Fencing-Token": "007"}})
	if status != http.StatusBadRequest || !strings.Contains(e.Message, `"007"`) {
		t.Fatalf("007: %d %q", status, e.Message)
	}
	status, _, _ = do(t, newFakeServer(f).Handler(), call{"PUT", "/v1/kv/k", "v", map[string]string{"Fencing-Token": "18446744073709551615"}})
	if status != http.StatusOK {
		t.Fatalf("max token refused: %d", status)
	}
}

// An invalid name or key is quoted as its sender wrote it, not as the URL
// escaped it.
func TestInvalidNamesShownUnescaped(t *testing.T) {
	for _, c := range []struct {
		call call
		want string
	}{
		{call{"GET", "/v1/locks/a%2Fb", "", nil}, `lock name "a/b"`},
		{call{"POST", "/v1/locks/a%2Fb/acquire", `{"holder":"w"}`, nil}, `lock name "a/b"`},
		{call{"POST", "/v1/locks/x%2F..%2Fy/release", `{` + lease + `,"token":3}`, nil}, `lock name "x/../y"`},
		{call{"GET", "/v1/kv/dir%2Ffile", "", nil}, `key "dir/file"`},
		{call{"GET", "/v1/locks/a%20b", "", nil}, `lock name "a b"`},
		{call{"GET", "/v1/locks/100%25", "", nil}, `lock name "100%"`},
	} {
		status, e, _ := do(t, newFakeServer(&fakeCluster{leader: true}).Handler(), c.call)
		if status != http.StatusBadRequest || !strings.HasPrefix(e.Message, c.want) {
			t.Errorf("%s %s: %d %q, want %s", c.call.method, c.call.path, status, e.Message, c.want)
		}
	}
}

func TestOversizedBodies(t *testing.T) {
	big := strings.Repeat("x", wire.MaxBodyBytes+1)
	for _, c := range []call{
		{"PUT", "/v1/kv/k", big, map[string]string{"Fencing-Token": "5"}},
		{"POST", "/v1/locks/a/acquire", `{"holder":"` + big + `"}`, nil},
	} {
		f := &fakeCluster{leader: true}
		status, e, _ := do(t, newFakeServer(f).Handler(), c)
		if status != http.StatusRequestEntityTooLarge || e.Code != wire.CodeBodyTooLarge || len(f.calls) != 0 {
			t.Fatalf("%s %s: %d %q calls %v", c.method, c.path, status, e.Code, f.calls)
		}
	}
}

// Each refusal from the cluster maps to its status and code.
func TestClusterErrorsMapToCodes(t *testing.T) {
	okAcquire := call{"POST", "/v1/locks/a/acquire", `{"holder":"w","ttl_ms":1000}`, nil}
	okRenew := call{"POST", "/v1/locks/a/renew", `{` + lease + `,"token":3}`, nil}
	okRelease := call{"POST", "/v1/locks/a/release", `{` + lease + `,"token":3}`, nil}
	okPut := call{"PUT", "/v1/kv/k", "v", map[string]string{"Fencing-Token": "5"}}
	okDelete := call{"DELETE", "/v1/kv/k", "", nil}
	cases := []struct {
		call   call
		err    error
		status int
		code   string
	}{
		{okAcquire, &refusal.HeldError{Lock: "a", Holder: "w0", Token: 4}, 409, wire.CodeLockHeld},
		{okAcquire, fmt.Errorf("wrapped: %w", cluster.ErrNoLeader), 503, wire.CodeNoLeader},
		{okAcquire, cluster.ErrOutcomeUnknown, 503, wire.CodeOutcomeUnknown},
		{okAcquire, coord.ErrTooManyWaiters, 429, wire.CodeTooManyWaiters},
		{okRenew, refusal.ErrLeaseLost, 410, wire.CodeLeaseLost},
		{okRelease, refusal.ErrLeaseLost, 410, wire.CodeLeaseLost},
		{okRelease, cluster.ErrNotLeader, 503, wire.CodeNoLeader},
		{okPut, &refusal.StaleError{Key: "k", Token: 5, LastToken: 9}, 409, wire.CodeStaleToken},
		{okPut, refusal.ErrNotLockHolder, 409, wire.CodeNotLockHolder},
		{okPut, &refusal.UnissuedError{Key: "k", Token: 5}, 409, wire.CodeUnissuedToken},
		{okPut, fmt.Errorf("%w: 9 keys", coord.ErrKVFull), 429, wire.CodeKVFull},
		{okDelete, fmt.Errorf("%w: \"k\"", refusal.ErrNoSuchKey), 404, wire.CodeNotFound},
		{okDelete, fmt.Errorf("%w: delete-key needs log format 2", entry.ErrFormatTooOld), 409, wire.CodeUpgradeRequired},
		{call{"POST", "/v1/cluster/restore", "", nil}, fmt.Errorf("%w: no epoch left", cluster.ErrInvalidEpoch), 400, wire.CodeInvalidEpoch},
		{call{"POST", "/v1/cluster/join", `{"id":"n4","raft_addr":"127.0.0.1:8004","http_addr":"127.0.0.1:7004"}`, nil}, cluster.ErrMemberConflict, 409, wire.CodeMemberConflict},
	}
	for _, tc := range cases {
		f := &fakeCluster{leader: true, err: tc.err}
		status, e, h := do(t, newFakeServer(f).Handler(), tc.call)
		if status != tc.status || e.Code != tc.code {
			t.Fatalf("%s %s with %v: got %d %q, want %d %q", tc.call.method, tc.call.path, tc.err, status, e.Code, tc.status, tc.code)
		}
		if status == 503 && h.Get("Retry-After") == "" {
			t.Fatalf("503 without Retry-After")
		}
		var held *refusal.HeldError
		if errors.As(tc.err, &held) && (e.Holder != "w0" || e.Token != 4) {
			t.Fatalf("lock_held body lacks holder/token: %+v", e)
		}
		var stale *refusal.StaleError
		if errors.As(tc.err, &stale) && e.LastToken != 9 {
			t.Fatalf("stale_token body lacks last_token: %+v", e)
		}
	}
}

// A key delete answers the mark the key had, and logs who removed it.
func TestDeleteKey(t *testing.T) {
	f := &fakeCluster{leader: true}
	rec := httptest.NewRecorder()
	NewServer(f, f, nil).Handler().ServeHTTP(rec, httptest.NewRequest("DELETE", "/v1/kv/report", nil))
	var got wire.DeleteKeyResponse
	if rec.Code != 200 || json.Unmarshal(rec.Body.Bytes(), &got) != nil || got != (wire.DeleteKeyResponse{Key: "report", Deleted: true, LastToken: 9}) {
		t.Fatalf("delete: %d %s", rec.Code, rec.Body)
	}
	if status, e, _ := do(t, NewServer(f, f, nil).Handler(), call{"DELETE", "/v1/kv/a%20b", "", nil}); status != 400 || e.Code != wire.CodeInvalidKey {
		t.Fatalf("delete of an invalid key: %d %s", status, e.Code)
	}
}

func TestNotFoundAndNoLeader(t *testing.T) {
	f := &fakeCluster{leader: true}
	h := newFakeServer(f).Handler()
	if status, e, _ := do(t, h, call{"GET", "/v1/kv/k", "", nil}); status != 404 || e.Code != wire.CodeNotFound {
		t.Fatalf("absent key: %d %q", status, e.Code)
	}
	if status, e, _ := do(t, h, call{"GET", "/v1/nope", "", nil}); status != 404 || e.Code != wire.CodeNotFound {
		t.Fatalf("unknown route: %d %q", status, e.Code)
	}
	// A follower that knows no leader answers 503 no_leader with Retry-After.
	f = &fakeCluster{leader: false}
	h = newFakeServer(f).Handler()
	status, e, hdr := do(t, h, call{"POST", "/v1/locks/a/acquire", `{"holder":"w"}`, nil})
	if status != 503 || e.Code != wire.CodeNoLeader || hdr.Get("Retry-After") == "" || len(f.calls) != 0 {
		t.Fatalf("no leader: %d %q calls %v", status, e.Code, f.calls)
	}
	if status, _, _ := do(t, h, call{"GET", "/readyz", "", nil}); status != 503 {
		t.Fatalf("readyz without leader: %d", status)
	}
	// A stale read is served locally even without a leader.
	if status, _, _ := do(t, h, call{"GET", "/v1/locks/a?stale=true", "", nil}); status != 200 {
		t.Fatalf("stale read without leader: %d", status)
	}
}

// TestListLocksStreams: the streamed listing is the JSON of a LockList,
// byte for byte, for no locks, one, and many.
func TestListLocksStreams(t *testing.T) {
	many := make([]coord.LockStatus, 1000)
	for i := range many {
		many[i] = coord.LockStatus{Lock: entry.Lock{Name: fmt.Sprintf("l%04d", i), Holder: "w", Token: uint64(i + 1), TTLMillis: 1000}, Held: i%3 != 0, Known: i%2 == 0, Remaining: time.Duration(i) * time.Millisecond}
	}
	for _, locks := range [][]coord.LockStatus{nil, many[:1], many} {
		f := &fakeCluster{leader: true, locks: locks}
		rec := httptest.NewRecorder()
		newFakeServer(f).Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/v1/locks", nil))
		if rec.Code != http.StatusOK || rec.Header().Get("Content-Type") != "application/json" {
			t.Fatalf("status %d, content type %q", rec.Code, rec.Header().Get("Content-Type"))
		}
		want := wire.LockList{Locks: make([]wire.LockStatus, len(locks))}
		for i, st := range locks {
			want.Locks[i] = lockStatus(st)
		}
		wantBody, _ := json.Marshal(want)
		if got := rec.Body.String(); got != string(wantBody)+"\n" {
			t.Fatalf("%d locks: body differs from a wire.LockList's JSON:\n got %.200s\nwant %.200s", len(locks), got, wantBody)
		}
	}
}

// RestorePath, which the server's body cap exempts, is the restore route.
func TestRestorePathIsTheRestoreRoute(t *testing.T) {
	f := &fakeCluster{leader: true}
	do(t, newFakeServer(f).Handler(), call{"POST", RestorePath, "", nil})
	if len(f.calls) != 1 || f.calls[0] != "restore" {
		t.Fatalf("POST %s reached %v", RestorePath, f.calls)
	}
}

// newFakeServer is the API over f as both the node and its coordination layer.
// newFakeServer answers at once when no leader is known.
func newFakeServer(f *fakeCluster) *Server { return NewServer(f, f, nil, WithLeaderWait(0)) }
