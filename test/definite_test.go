package test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fencer-io/fencer/api/wire"
	"github.com/fencer-io/fencer/test/chaos/harness"
	tc "github.com/fencer-io/fencer/test/testcluster"
)

// A leader paused past its term (SIGSTOP) wakes up believing it still leads,
// with an FSM that lacks what its successor granted meanwhile. Requests that
// reached its socket while it slept are the first thing it serves. Each
// answer that says something definite from its own state must be true: a
// fenced put with a token the successor granted is never "unissued_token",
// a lookup of that token never "never_granted", and an acquire of a lock the
// successor released never "lock_held". (The chaos suite met the false
// unissued_token four times under leader pauses and isolations; the put is
// answered from fsm.LastToken without a quorum round.) Each round pauses the
// leader, takes a grant from the new one, sends the calls to the sleeping
// one, and resumes it; five rounds make the race near certain.
func TestDeposedLeaderGivesNoFalseDefiniteAnswer(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and runs a cluster of processes")
	}
	work := t.TempDir()
	bin, err := harness.BuildFencer(work)
	if err != nil {
		t.Fatal(err)
	}
	logs := filepath.Join(work, "logs")
	if err := os.MkdirAll(logs, 0o755); err != nil {
		t.Fatal(err)
	}
	group := &harness.Group{}
	t.Cleanup(func() {
		group.KillAll()
		if t.Failed() {
			for _, name := range []string{"n1", "n2", "n3"} {
				b, _ := os.ReadFile(filepath.Join(logs, name+".log"))
				t.Logf("--- %s.log (tail)\n%s", name, tail(string(b), 30))
			}
		}
	})
	cl, err := harness.NewCluster(harness.Options{Bin: bin, Dir: filepath.Join(work, "nodes"), LogDir: logs, Nodes: 3, Group: group})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if err := cl.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if err := cl.WaitHealthy(ctx); err != nil {
		t.Fatal(err)
	}

	for round := range 5 {
		old, _, err := cl.Leader(ctx)
		if err != nil {
			t.Fatal(err)
		}
		// A lock the old leader sees held: the new one releases it.
		lock, key := fmt.Sprintf("deposed.%d", round), fmt.Sprintf("deposed.%d", round)
		var before wire.Grant
		if code := postJSON(t, old.HTTPAddr, "/v1/locks/"+lock+"/acquire", `{"holder":"a","ttl_ms":60000}`, &before); code != http.StatusOK {
			t.Fatalf("round %d: acquire through the leader: %d", round, code)
		}
		// Asleep and cut off from the others' Raft traffic: on waking it
		// hears nothing of its successor, and believes it leads until its
		// leader lease runs out.
		cl.Net().Isolate(old.ID)
		if err := cl.Pause(old); err != nil {
			t.Fatal(err)
		}
		next := awaitOtherLeader(t, ctx, cl, old)
		if code := postJSON(t, next.HTTPAddr, "/v1/locks/"+lock+"/release", fmt.Sprintf(`{"token":%d,"lease":%q}`, before.Token, before.Lease), nil); code != http.StatusOK {
			t.Fatalf("round %d: release through the new leader %s: %d", round, next.ID, code)
		}
		var g wire.Grant
		if code := postJSON(t, next.HTTPAddr, "/v1/locks/"+lock+".new/acquire", `{"holder":"b","ttl_ms":60000}`, &g); code != http.StatusOK {
			t.Fatalf("round %d: acquire through the new leader %s: %d", round, next.ID, code)
		}
		// Queue the calls on the sleeping leader's socket, then wake it.
		var calls []*sleeper
		for i := range 8 {
			calls = append(calls,
				sendRaw(t, old.HTTPAddr, "PUT", fmt.Sprintf("/v1/kv/%s.%d", key, i), "v", "Fencing-Token", fmt.Sprint(g.Token)),
				sendRaw(t, old.HTTPAddr, "GET", "/v1/tokens/"+fmt.Sprint(g.Token), ""))
		}
		calls = append(calls, sendRaw(t, old.HTTPAddr, "POST", "/v1/locks/"+lock+"/acquire", `{"holder":"c","ttl_ms":60000}`, "Content-Type", "application/json"))
		if err := cl.Resume(old); err != nil {
			t.Fatal(err)
		}
		for _, c := range calls {
			status, body := c.answer(t)
			var e wire.Error
			json.Unmarshal([]byte(body), &e)
			switch {
			case e.Code == wire.CodeUnissuedToken:
				t.Errorf("round %d: %s on the deposed leader %s: %d %s, for token %d granted by %s", round, c.what, old.ID, status, body, g.Token, next.ID)
			case e.Code == wire.CodeUnknownToken:
				t.Errorf("round %d: %s on the deposed leader %s: %d %s, for token %d granted by %s", round, c.what, old.ID, status, body, g.Token, next.ID)
			case e.Code == wire.CodeLockHeld && strings.Contains(body, fmt.Sprint(before.Token)):
				t.Errorf("round %d: %s on the deposed leader %s: %d %s, a grant %s released", round, c.what, old.ID, status, body, next.ID)
			default:
				t.Logf("round %d: %s on %s: %d %s", round, c.what, old.ID, status, strings.TrimSpace(body))
			}
		}
		cl.Net().HealAll()
		if err := cl.WaitHealthy(ctx); err != nil {
			t.Fatal(err)
		}
	}
}

// awaitOtherLeader waits for a leader other than old.
func awaitOtherLeader(t *testing.T, ctx context.Context, cl *harness.Cluster, old *harness.Node) *harness.Node {
	t.Helper()
	var next *harness.Node
	tc.Poll(t, 15*time.Second, "a new leader while "+old.ID+" sleeps", func() bool {
		for _, n := range cl.Nodes() {
			if n == old {
				continue
			}
			var st wire.ClusterStatus
			if getJSONFrom(n.HTTPAddr, "/v1/cluster", &st) == nil && st.Leader != "" && st.Leader != old.ID {
				next = cl.Node(st.Leader)
				var h wire.Health
				return next != nil && getJSONFrom(next.HTTPAddr, "/readyz", &h) == nil
			}
		}
		return false
	})
	return next
}

func getJSONFrom(addr, path string, out any) error {
	c := http.Client{Timeout: time.Second}
	resp, err := c.Get("http://" + addr + path)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s", path, resp.Status)
	}
	return json.NewDecoder(resp.Body).Decode(out)
}

func postJSON(t *testing.T, addr, path, body string, out any) int {
	t.Helper()
	c := http.Client{Timeout: 10 * time.Second}
	resp, err := c.Post("http://"+addr+path, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatalf("POST %s: %v", path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode == http.StatusOK && out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			t.Fatalf("POST %s: %v in %s", path, err, b)
		}
	}
	if resp.StatusCode != http.StatusOK {
		t.Logf("POST %s: %d %s", path, resp.StatusCode, b)
	}
	return resp.StatusCode
}

// sleeper is a request written to a paused node's socket: the kernel
// accepts the connection and buffers the request, which the node serves
// first when it wakes.
type sleeper struct {
	what string
	conn net.Conn
}

func sendRaw(t *testing.T, addr, method, path, body string, headers ...string) *sleeper {
	t.Helper()
	conn, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s HTTP/1.1\r\nHost: %s\r\nContent-Length: %d\r\nConnection: close\r\n", method, path, addr, len(body))
	for i := 0; i+1 < len(headers); i += 2 {
		fmt.Fprintf(&b, "%s: %s\r\n", headers[i], headers[i+1])
	}
	b.WriteString("\r\n" + body)
	if _, err := io.WriteString(conn, b.String()); err != nil {
		t.Fatal(err)
	}
	return &sleeper{what: method + " " + path, conn: conn}
}

func (s *sleeper) answer(t *testing.T) (int, string) {
	t.Helper()
	defer s.conn.Close()
	s.conn.SetDeadline(time.Now().Add(20 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(s.conn), nil)
	if err != nil {
		t.Fatalf("%s: %v", s.what, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}
