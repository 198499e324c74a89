package chaos

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fencer-io/fencer/api/wire"
	"github.com/fencer-io/fencer/test/chaos/harness"
)

// A follower whose HTTP to the leader is cut, while its Raft is not, still
// follows but can no longer forward: the cut holds at the address the
// leader advertises, which the follower learned from the cluster, so no
// request slips past it. Healing lets it forward again.
func TestHTTPCutStopsForwardingNotRaft(t *testing.T) {
	if testing.Short() {
		t.Skip("-short")
	}
	group := &harness.Group{}
	t.Cleanup(group.KillAll)
	dir := t.TempDir()
	cl, err := harness.NewCluster(harness.Options{Bin: fencerBin(t), Dir: filepath.Join(dir, "nodes"), LogDir: dir, Nodes: 3, Group: group})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := cl.Start(ctx); err != nil {
		t.Fatalf("start: %v (logs in %s)", err, dir)
	}
	l, _, err := cl.Leader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var f *harness.Node
	for _, m := range cl.Members() {
		if m != l {
			f = m
		}
	}
	// A read of a missing key through the follower: only the leader
	// answers it, so a 404 has been forwarded.
	get := func() (int, string) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+f.HTTPAddr+"/v1/kv/nothing-here", nil)
		resp, err := (&http.Client{Timeout: 5 * time.Second}).Do(req)
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	await := func(what string, ok func(int, string) bool) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for {
			code, body := get()
			if ok(code, body) {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: last answer %d %s", what, code, body)
			}
			time.Sleep(100 * time.Millisecond) // polling the follower's answer
		}
	}
	await("forwarded before the cut", func(code int, _ string) bool { return code == http.StatusNotFound })
	if addr := advertised(ctx, t, f, l.ID); addr != l.Gate {
		t.Fatalf("%s knows leader %s at %s, not at its gate %s: forwarding would bypass the cut", f.ID, l.ID, addr, l.Gate)
	}

	cl.CutHTTP(f.ID, l.ID, false)
	await("forwarding refused during the cut", func(code int, body string) bool {
		return code == http.StatusServiceUnavailable && strings.Contains(body, "no_leader")
	})
	if code, body := get(); code != http.StatusServiceUnavailable {
		t.Fatalf("a second read during the cut: %d %s, want 503", code, body)
	}
	if err := cl.WaitHealthy(ctx); err != nil {
		t.Fatalf("raft should be untouched by an http cut: %v", err)
	}
	if c := cl.HTTP().Counts(); c[f.ID] == 0 || c[""] != 0 {
		t.Fatalf("gate counts %v: want %s's forwarding attributed to it, nothing unattributed", c, f.ID)
	}

	cl.HealNetwork()
	await("forwarded after healing", func(code int, _ string) bool { return code == http.StatusNotFound })
	t.Logf("follower %s could not forward to leader %s while its http link was cut, and could again after", f.ID, l.ID)
}

// advertised is the HTTP address node n knows member id at.
func advertised(ctx context.Context, t *testing.T, n *harness.Node, id string) string {
	t.Helper()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+n.HTTPAddr+"/v1/cluster", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var st wire.ClusterStatus
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		t.Fatal(err)
	}
	for _, m := range st.Members {
		if m.ID == id {
			return m.HTTPAddr
		}
	}
	t.Fatalf("%s does not know member %s", n.ID, id)
	return ""
}
