package test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"

	"github.com/fencer-io/fencer/api/wire"
	"github.com/fencer-io/fencer/fsm/entry"
	tc "github.com/fencer-io/fencer/test/testcluster"
)

// TestLogFormatFollowsTheOldestMember walks a rolling upgrade: while one
// member's record says its build reads JSON only (as a member registered by
// a build from before the binary entries does), the leader writes lock
// cycles as JSON; once that member comes back on this build and registers
// again, binary. The raft log of a stopped member is read to check the
// bytes actually written, not just what the status says.
func TestLogFormatFollowsTheOldestMember(t *testing.T) {
	c := tc.New(t, 3)
	leader := c.WaitLeader(10 * time.Second)
	c.WaitMembers(3, 10*time.Second)
	format := func() int {
		var st wire.ClusterStatus
		code, body, _ := tc.Do(t, "GET", leader.URL()+"/v1/cluster", "")
		if code != 200 || json.Unmarshal([]byte(body), &st) != nil {
			return -1
		}
		return st.LogFormat
	}
	tc.Poll(t, 15*time.Second, "every member recorded this build's format", func() bool { return format() == entry.LogFormat })
	cycle := func(name string) {
		t.Helper()
		code, body, _ := tc.Do(t, "POST", leader.URL()+"/v1/locks/"+name+"/acquire", `{"holder":"upgrade","ttl_ms":5000}`)
		if code != 200 {
			t.Fatalf("acquire %s: %d %s", name, code, body)
		}
		var g wire.Grant
		json.Unmarshal([]byte(body), &g)
		code, body, _ = tc.Do(t, "POST", leader.URL()+"/v1/locks/"+name+"/release", fmt.Sprintf(`{"token":%d,"lease":%q}`, g.Token, g.Lease))
		if code != 200 {
			t.Fatalf("release %s: %d %s", name, code, body)
		}
	}
	cycle("binary-1")

	// A follower re-registers the way a build from before log formats does:
	// the same join, without the format header.
	var old *tc.Node
	for _, n := range c.Running() {
		if n != leader {
			old = n
			break
		}
	}
	var ident struct {
		Incarnation string `json:"incarnation"`
		ClusterID   string `json:"cluster_id"`
	}
	// The member's own registration must be over first (its last step
	// records the cluster id): one still retrying would register this
	// build's format again after the old-style join below.
	tc.Poll(t, 15*time.Second, old.ID+" to finish registering", func() bool {
		raw, err := os.ReadFile(filepath.Join(old.DataDir, "node.json"))
		return err == nil && json.Unmarshal(raw, &ident) == nil && ident.ClusterID != ""
	})
	join := fmt.Sprintf(`{"id":%q,"raft_addr":%q,"http_addr":%q,"voter":true,"incarnation":%q}`,
		old.ID, old.Inst.Node.RaftAddr(), old.HTTPAddr, ident.Incarnation)
	if code, body, _ := tc.Do(t, "POST", leader.URL()+"/v1/cluster/join", join); code != 200 {
		t.Fatalf("old-style join: %d %s", code, body)
	}
	joined := time.Now()
	tc.Poll(t, 10*time.Second, "the leader falls back to JSON", func() bool { return format() == entry.LogFormatJSON })
	// A real mixed-version cluster is ready for what its oldest member
	// reads, says so, and still gates what that member cannot read.
	for _, n := range c.Running() {
		tc.Poll(t, 5*time.Second, n.ID+"'s /readyz to say log format 0", func() bool {
			code, body, _ := tc.Do(t, "GET", n.URL()+"/readyz", "")
			var h wire.Health
			return code == 200 && json.Unmarshal([]byte(body), &h) == nil && h.LogFormat == entry.LogFormatJSON && strings.Contains(h.Note, "refused")
		})
	}
	if code, body, _ := tc.Do(t, "POST", leader.URL()+"/v1/semaphores/s/acquire", `{"holder":"w","limit":2,"ttl_ms":5000}`); code != 409 || !strings.Contains(body, wire.CodeUpgradeRequired) {
		t.Fatalf("a semaphore with a member on JSON: %d %s; want 409 upgrade_required", code, body)
	}
	// A member key is kept only while every member reads it: the record
	// of a member that says it reads JSON holds none (an older build
	// would have dropped it), and the snapshot is not of version 4 for it.
	if m := memberRecord(t, leader, old.ID); m.Key != "" {
		t.Fatalf("%s's record keeps a member key while it says it reads JSON: %+v", old.ID, m)
	}
	// Keep cycling past the leader's cached answer (a join holds JSON for a
	// while by itself): the member's record alone must keep it JSON.
	var jsonLocks []string
	for i := 1; i == 1 || time.Since(joined) < 3*time.Second; i++ {
		name := fmt.Sprintf("json-%d", i)
		cycle(name)
		jsonLocks = append(jsonLocks, name)
	}

	// The "old" member restarts on this build: it registers its format and
	// the leader goes back to binary.
	c.Stop(old)
	types := lockCycleTypes(t, old.DataDir)
	if types["binary-1"] != "binary" {
		t.Fatalf("binary-1 was written as %q", types["binary-1"])
	}
	for _, name := range jsonLocks {
		if types[name] != "json" {
			t.Fatalf("%s, written while a member's record said JSON only, is %q (of %d such cycles)", name, types[name], len(jsonLocks))
		}
	}
	c.Restart(old)
	tc.Poll(t, 15*time.Second, "the upgraded member re-registered", func() bool { return format() == entry.LogFormat })
	tc.Poll(t, 15*time.Second, "the upgraded member registered its key again", func() bool { return memberRecord(t, leader, old.ID).Key != "" })
	cycle("binary-2")
	c.Stop(old)
	if got := lockCycleTypes(t, old.DataDir)["binary-2"]; got != "binary" {
		t.Fatalf("after the upgrade binary-2 was written as %s", got)
	}
}

// lockCycleTypes reads a stopped member's raft log and reports, per lock
// acquired, whether its acquire entry was binary or JSON.
func lockCycleTypes(t *testing.T, dir string) map[string]string {
	t.Helper()
	store, err := raftboltdb.NewBoltStore(filepath.Join(dir, "raft.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	first, _ := store.FirstIndex()
	last, _ := store.LastIndex()
	out := map[string]string{}
	for i := first; i <= last && i > 0; i++ {
		var l raft.Log
		if store.GetLog(i, &l) != nil || l.Type != raft.LogCommand || len(l.Data) == 0 {
			continue
		}
		cmd, err := entry.Decode(l.Data)
		if err != nil {
			continue
		}
		if a, ok := cmd.(*entry.Acquire); ok {
			out[a.Lock] = map[bool]string{true: "binary", false: "json"}[entry.CommandType(l.Data[0]) != entry.CmdAcquire]
		}
	}
	return out
}
