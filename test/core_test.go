package test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/fencer-io/fencer/api/wire"
	"github.com/fencer-io/fencer/fsm/entry"
	"github.com/fencer-io/fencer/fsm/snapshot"
	tc "github.com/fencer-io/fencer/test/testcluster"
)

// acquire sends one acquire over raw HTTP. Like a real client it retries a
// 503 (no leader, e.g. an election on a loaded machine) with the same
// request id, so a retry can never mint a second token.
func acquire(t *testing.T, n *tc.Node, lock, holder string, ttlMs, waitMs int64) (int, wire.Grant, wire.Error) {
	t.Helper()
	requestID := fmt.Sprintf("%s-%d", holder, time.Now().UnixNano())
	body := fmt.Sprintf(`{"holder":%q,"ttl_ms":%d,"wait_ms":%d,"request_id":%q}`, holder, ttlMs, waitMs, requestID)
	var status int
	var resp string
	for attempt := 0; ; attempt++ {
		status, resp, _ = tc.Do(t, http.MethodPost, n.URL()+"/v1/locks/"+lock+"/acquire", body)
		if status != http.StatusServiceUnavailable || attempt == 20 {
			break
		}
		time.Sleep(250 * time.Millisecond) // backoff before a retry, not a wait for a state
	}
	var g wire.Grant
	var e wire.Error
	if status == http.StatusOK {
		mustJSON(t, resp, &g)
	} else {
		mustJSON(t, resp, &e)
	}
	return status, g, e
}

func mustAcquire(t *testing.T, n *tc.Node, lock, holder string) wire.Grant {
	t.Helper()
	status, g, e := acquire(t, n, lock, holder, 10_000, 0)
	if status != http.StatusOK {
		t.Fatalf("acquire %s via %s: %d %+v", lock, n.ID, status, e)
	}
	return g
}

func release(t *testing.T, n *tc.Node, g wire.Grant) int {
	t.Helper()
	status, _, _ := tc.Do(t, http.MethodPost, n.URL()+"/v1/locks/"+g.Lock+"/release", fmt.Sprintf(`{"lease":%q,"token":%d}`, g.Lease, g.Token))
	return status
}

func put(t *testing.T, n *tc.Node, key, value string, headers ...string) (int, wire.Error) {
	t.Helper()
	status, body, _ := tc.Do(t, http.MethodPut, n.URL()+"/v1/kv/"+key, value, headers...)
	var e wire.Error
	if status != http.StatusOK {
		mustJSON(t, body, &e)
	}
	return status, e
}

func mustJSON(t *testing.T, s string, v any) {
	t.Helper()
	if err := json.Unmarshal([]byte(s), v); err != nil {
		t.Fatalf("decode %q: %v", s, err)
	}
}

func tok(v uint64) string { return strconv.FormatUint(v, 10) }

// lastToken is the highest token a node's state machine has applied.
func lastToken(n *tc.Node) uint64 {
	st, _ := n.Inst.Node.Status()
	return st.LastToken
}

// memberRecord is the replicated record of member id (its addresses,
// incarnation and log format), read from a backup the leader takes.
func memberRecord(t *testing.T, leader *tc.Node, id string) entry.Member {
	t.Helper()
	var buf bytes.Buffer
	if _, err := leader.Inst.Node.Backup(context.Background(), &buf); err != nil {
		t.Fatalf("backup: %v", err)
	}
	img, err := snapshot.ReadImage(&buf)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range img.Members {
		if m.ID == id {
			return m
		}
	}
	return entry.Member{}
}

// epoch is the token epoch of a node's state machine.
func epoch(n *tc.Node) uint64 {
	st, _ := n.Inst.Node.Status()
	return st.Epoch
}

// The seed article's scenario, through HTTP: a holder stalls, its lease
// expires, a new holder writes, and the old holder's late write is refused;
// so are a replay of the new token and a write with no token at all.
func TestStaleHolderIsFencedOff(t *testing.T) {
	c := tc.New(t, 3)
	n := c.Nodes[1] // any node serves; followers forward
	status, old, e := acquire(t, n, "db", "old-leader", 200, 0)
	if status != http.StatusOK {
		t.Fatalf("acquire: %d %+v", status, e)
	}
	// The old holder "pauses"; the cluster expires its lease and grants the
	// lock to the replacement, which waits for it.
	status, cur, e := acquire(t, n, "db", "new-leader", 10_000, 10_000)
	if status != http.StatusOK {
		t.Fatalf("replacement acquire: %d %+v", status, e)
	}
	if cur.Token <= old.Token {
		t.Fatalf("new token %d not above old %d", cur.Token, old.Token)
	}
	if s, e := put(t, n, "record", "from-new-leader", "Fencing-Token", tok(cur.Token)); s != http.StatusOK {
		t.Fatalf("new holder's write: %d %+v", s, e)
	}
	s, e := put(t, n, "record", "from-stale-leader", "Fencing-Token", tok(old.Token))
	if s != http.StatusConflict || e.Code != wire.CodeStaleToken || e.LastToken != cur.Token {
		t.Fatalf("stale write: %d %+v", s, e)
	}
	if s, e := put(t, n, "record", "replay", "Fencing-Token", tok(cur.Token)); s != http.StatusConflict || e.Code != wire.CodeStaleToken {
		t.Fatalf("replay: %d %+v", s, e)
	}
	if s, e := put(t, n, "record", "no-token"); s != http.StatusPreconditionRequired || e.Code != wire.CodeMissingToken {
		t.Fatalf("missing token: %d %+v", s, e)
	}
	if s, e := put(t, n, "record", "zero", "Fencing-Token", "0"); s != http.StatusPreconditionRequired || e.Code != wire.CodeMissingToken {
		t.Fatalf("zero token: %d %+v", s, e)
	}
	next := mustAcquire(t, n, "other", "new-leader")
	if s, e := put(t, n, "record", "from-new-leader-again", "Fencing-Token", tok(next.Token)); s != http.StatusOK {
		t.Fatalf("newer token: %d %+v", s, e)
	}
	status, body, h := tc.Do(t, http.MethodGet, c.Nodes[2].URL()+"/v1/kv/record", "")
	if status != http.StatusOK || body != "from-new-leader-again" || h.Get("Fencing-Token") != tok(next.Token) {
		t.Fatalf("read back: %d %q token %s", status, body, h.Get("Fencing-Token"))
	}
}

// With Fencing-Lock, a holder whose lease is gone is refused even before
// anybody newer has written.
func TestWriteUnderLostLeaseRefused(t *testing.T) {
	c := tc.New(t, 3)
	n := c.WaitLeader(10 * time.Second)
	g := mustAcquire(t, n, "job", "w1")
	if s, e := put(t, n, "out", "v1", "Fencing-Token", tok(g.Token), "Fencing-Lock", "job"); s != http.StatusOK {
		t.Fatalf("holder write: %d %+v", s, e)
	}
	if release(t, n, g) != http.StatusOK {
		t.Fatal("release failed")
	}
	s, e := put(t, n, "out2", "v2", "Fencing-Token", tok(g.Token), "Fencing-Lock", "job")
	if s != http.StatusConflict || e.Code != wire.CodeNotLockHolder {
		t.Fatalf("write after release: %d %+v", s, e)
	}
}
