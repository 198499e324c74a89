package test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fencer-io/fencer/api/client"
	"github.com/fencer-io/fencer/api/wire"
	"github.com/fencer-io/fencer/cluster"
	"github.com/fencer-io/fencer/cluster/logstore"
	"github.com/fencer-io/fencer/cluster/recovery"
	"github.com/fencer-io/fencer/fsm/entry"
	tc "github.com/fencer-io/fencer/test/testcluster"
)

// acquireLoop acquires and releases locks through the Go client until stop
// is closed, checking that every token exceeds the previous one.
type acquireLoop struct {
	t       *testing.T
	c       *client.Client
	stop    chan struct{}
	done    chan struct{}
	grants  atomic.Int64
	last    atomic.Uint64
	mu      sync.Mutex
	failure error
}

func startAcquireLoop(t *testing.T, endpoints []string) *acquireLoop {
	c, err := client.New(endpoints, client.WithTimeout(5*time.Second), client.WithRetry(client.Retry{Attempts: 40, MinBackoff: 50 * time.Millisecond, MaxBackoff: 500 * time.Millisecond}))
	if err != nil {
		t.Fatal(err)
	}
	l := &acquireLoop{t: t, c: c, stop: make(chan struct{}), done: make(chan struct{})}
	go l.run()
	return l
}

func (l *acquireLoop) run() {
	defer close(l.done)
	for i := 0; ; i++ {
		select {
		case <-l.stop:
			return
		default:
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		lease, err := l.c.Acquire(ctx, fmt.Sprintf("loop-%d", i%7), client.TTL(5*time.Second), client.NoKeepAlive())
		if err == nil {
			if prev := l.last.Swap(lease.Token()); lease.Token() <= prev {
				err = fmt.Errorf("token %d after %d", lease.Token(), prev)
			} else {
				l.grants.Add(1)
				err = lease.Release(ctx)
			}
		}
		cancel()
		if err != nil {
			l.mu.Lock()
			l.failure = fmt.Errorf("iteration %d: %w", i, err)
			l.mu.Unlock()
			return
		}
	}
}

// waitGrants polls until the loop has made n more grants.
func (l *acquireLoop) waitGrants(n int64) {
	l.t.Helper()
	target := l.grants.Load() + n
	tc.Poll(l.t, 30*time.Second, fmt.Sprintf("%d grants", target), func() bool {
		l.mu.Lock()
		defer l.mu.Unlock()
		if l.failure != nil {
			l.t.Fatalf("acquire loop failed: %v", l.failure)
		}
		return l.grants.Load() >= target
	})
}

func (l *acquireLoop) finish() {
	l.t.Helper()
	close(l.stop)
	<-l.done
	if l.failure != nil {
		l.t.Fatalf("acquire loop failed: %v", l.failure)
	}
}

func endpoints(c *tc.Cluster) []string {
	var out []string
	for _, n := range c.Running() {
		out = append(out, n.HTTPAddr)
	}
	return out
}

// Grow 3 → 5 and shrink 5 → 3 under a running acquire loop, removing the
// leader last: no request fails beyond the client's retries and tokens keep
// increasing.
func TestMembershipChangesUnderLoad(t *testing.T) {
	c := tc.New(t, 3)
	loop := startAcquireLoop(t, endpoints(c))
	loop.waitGrants(5)

	c.Add("n4")
	c.Add("n5")
	c.WaitMembers(5, 30*time.Second)
	loop.waitGrants(5)

	admin, _ := client.New(endpoints(c))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	leader := c.WaitLeader(10 * time.Second)
	var followers []*tc.Node
	for _, n := range c.Running() {
		if n != leader {
			followers = append(followers, n)
		}
	}
	for _, n := range followers[:1] {
		if err := admin.RemoveMember(ctx, n.ID); err != nil {
			t.Fatalf("remove %s: %v", n.ID, err)
		}
		c.Stop(n)
		c.Forget(n)
		loop.waitGrants(3)
	}
	// Removing the leader transfers leadership, then the new leader removes it.
	if err := admin.RemoveMember(ctx, leader.ID); err != nil {
		t.Fatalf("remove leader %s: %v", leader.ID, err)
	}
	c.Stop(leader)
	c.Forget(leader)
	c.WaitMembers(3, 30*time.Second)
	loop.waitGrants(5)
	loop.finish()
	st, _ := c.WaitLeader(10 * time.Second).Inst.Node.Status()
	for _, m := range st.Members {
		if m.ID == leader.ID || m.ID == followers[0].ID {
			t.Fatalf("removed member %s still in the configuration", m.ID)
		}
	}
	t.Logf("%d grants during membership changes, last token %d", loop.grants.Load(), loop.last.Load())
}

// A voter restarted with an empty data dir under its old id is refused, with
// a message saying how to replace it; --replace then works, and tokens keep
// increasing.
func TestWipedVoterIsRefusedThenReplaced(t *testing.T) {
	c := tc.New(t, 3)
	leader := c.WaitLeader(10 * time.Second)
	last := mustAcquire(t, leader, "before", "w").Token
	victim := c.Nodes[2]
	if victim == leader {
		victim = c.Nodes[1]
	}
	c.Stop(victim)
	c.Forget(victim)
	if err := os.RemoveAll(victim.DataDir); err != nil {
		t.Fatal(err)
	}
	_, err := c.TryAdd(victim.ID)
	if err == nil || !errors.Is(err, cluster.ErrMemberConflict) || !strings.Contains(err.Error(), "members remove "+victim.ID) {
		t.Fatalf("wiped voter under its old id: %v, want a refusal naming the replace path", err)
	}
	if _, err := os.Stat(filepath.Join(victim.DataDir, "raft.db")); err == nil {
		// Refused before Raft ran: the dir holds no vote.
		if st, _ := leader.Inst.Node.Status(); len(st.Members) != 3 {
			t.Fatalf("membership changed by a refused join: %+v", st.Members)
		}
	}
	os.RemoveAll(victim.DataDir)
	back := c.Add(victim.ID, func(cfg *cluster.Config) { cfg.Replace = true })
	c.WaitMembers(3, 30*time.Second)
	tc.Poll(t, 20*time.Second, "replaced member caught up", func() bool {
		return lastToken(back) >= last
	})
	g := mustAcquire(t, c.WaitLeader(10*time.Second), "after", "w")
	if g.Token <= last {
		t.Fatalf("token after replacement %d, not above %d", g.Token, last)
	}
}

// An operator's add naming an existing member (here with another HTTP
// address) keeps the member's recorded incarnation: the member, wiped
// afterwards, is still refused under its old id (issue 13 item 4: the add
// used to erase the incarnation and so switch the check off).
func TestOperatorAddKeepsTheIncarnation(t *testing.T) {
	c := tc.New(t, 3)
	leader := c.WaitLeader(10 * time.Second)
	victim := c.Nodes[2]
	if victim == leader {
		victim = c.Nodes[1]
	}
	before := memberRecord(t, leader, victim.ID)
	if before.Incarnation == "" {
		t.Fatalf("%s registered without an incarnation: %+v", victim.ID, before)
	}
	c.Stop(victim)
	c.Forget(victim)
	admin, err := client.New(endpoints(c))
	if err != nil {
		t.Fatal(err)
	}
	if err := admin.AddMember(context.Background(), victim.ID, victim.RaftAddr, "127.0.0.1:1", true); err != nil {
		t.Fatalf("operator add of an existing member: %v", err)
	}
	tc.Poll(t, 10*time.Second, "the new HTTP address recorded", func() bool {
		return memberRecord(t, c.WaitLeader(10*time.Second), victim.ID).HTTPAddr == "127.0.0.1:1"
	})
	after := memberRecord(t, c.WaitLeader(10*time.Second), victim.ID)
	if after.Incarnation != before.Incarnation || after.LogFormat != before.LogFormat {
		t.Fatalf("operator add changed the record from %+v to %+v", before, after)
	}
	if err := os.RemoveAll(victim.DataDir); err != nil {
		t.Fatal(err)
	}
	_, err = c.TryAdd(victim.ID, func(cfg *cluster.Config) { cfg.JoinTimeout = 10 * time.Second })
	if !errors.Is(err, cluster.ErrMemberConflict) {
		t.Fatalf("wiped member after an operator add: %v, want refused as a member conflict", err)
	}
}

// A data dir of another cluster is refused.
func TestDataDirOfAnotherClusterRefused(t *testing.T) {
	a := tc.New(t, 1)
	b := tc.New(t, 1)
	mustAcquire(t, a.WaitLeader(10*time.Second), "x", "w")
	stranger := a.Nodes[0]
	tc.Poll(t, 10*time.Second, "cluster id recorded", func() bool {
		data, _ := os.ReadFile(filepath.Join(stranger.DataDir, "node.json"))
		return strings.Contains(string(data), "cluster_id")
	})
	a.Stop(stranger)
	_, err := b.TryAdd("n1", func(cfg *cluster.Config) { cfg.DataDir = stranger.DataDir; cfg.ID = "n1" })
	if err == nil || !strings.Contains(err.Error(), "belongs to cluster") {
		t.Fatalf("a data dir of another cluster: %v, want a refusal", err)
	}
}

// Save a snapshot at token T, keep issuing to T+K, destroy the cluster,
// restore into a new one: the next token exceeds T+K, and fenced keys still
// refuse their old tokens.
func TestRestoreMovesTokensPastTheOldCluster(t *testing.T) {
	eachLogStore(t, restoreMovesTokensPastTheOldCluster)
}

func restoreMovesTokensPastTheOldCluster(t *testing.T, kind logstore.Kind) {
	old := tc.New(t, 3, tc.Options{LogStore: kind})
	leader := old.WaitLeader(10 * time.Second)
	tokenT := mustAcquire(t, leader, "a", "w").Token
	if s, e := put(t, leader, "k", "at-T", "Fencing-Token", tok(tokenT)); s != http.StatusOK {
		t.Fatalf("put: %d %+v", s, e)
	}
	admin, _ := client.New(endpoints(old))
	var backup bytes.Buffer
	h, err := admin.SnapshotSave(context.Background(), &backup)
	if err != nil {
		t.Fatal(err)
	}
	if h.LastToken != tokenT || h.Keys != 1 {
		t.Fatalf("snapshot header %+v", h)
	}
	var last uint64
	for i := range 20 {
		last = mustAcquire(t, leader, fmt.Sprintf("after-%d", i), "w").Token
	}
	old.Close()

	fresh := tc.New(t, 3, tc.Options{LogStore: kind})
	fadmin, _ := client.New(endpoints(fresh))
	rh, err := fadmin.SnapshotRestore(context.Background(), backup.Bytes(), 0)
	if err != nil {
		t.Fatal(err)
	}
	if rh.Epoch != 1 {
		t.Fatalf("epoch after restore %d, want 1", rh.Epoch)
	}
	fl := fresh.WaitLeader(10 * time.Second)
	g := mustAcquire(t, fl, "a", "w2") // the backup's holder of "a" is gone
	if g.Token <= last || g.Token <= tokenT {
		t.Fatalf("token after restore %d, not above %d", g.Token, last)
	}
	if s, e := put(t, fl, "k", "stale", "Fencing-Token", tok(tokenT)); s != http.StatusConflict || e.Code != wire.CodeStaleToken {
		t.Fatalf("old token after restore: %d %+v", s, e)
	}
	// The old cluster's last grant is above the key's restored mark, and
	// its holder may have been superseded after the backup: refused all the
	// same, as a stale write (the epoch floor).
	refusesOldEpoch(t, fl, "k", last, tokenT)
	if s, e := put(t, fl, "k", "new", "Fencing-Token", tok(g.Token), "Fencing-Lock", "a"); s != http.StatusOK {
		t.Fatalf("the new grant's write after restore: %d %+v", s, e)
	}
	// Every member of the new cluster has the restored state.
	tc.Poll(t, 20*time.Second, "followers restored", func() bool {
		for _, n := range fresh.Running() {
			if _, ok, _, _ := n.Inst.Coord.Get(context.Background(), "k", true); !ok || epoch(n) != 1 {
				return false
			}
		}
		return true
	})
	// A second restore of the same backup moves the epoch again.
	if rh, err := fadmin.SnapshotRestore(context.Background(), backup.Bytes(), 0); err != nil || rh.Epoch != 2 {
		t.Fatalf("second restore: epoch %d, %v", rh.Epoch, err)
	}
	if g2 := mustAcquire(t, fresh.WaitLeader(10*time.Second), "b", "w"); g2.Token <= g.Token {
		t.Fatalf("token after second restore %d, not above %d", g2.Token, g.Token)
	}
}

// After losing 2 of 3 nodes for good, the survivor is recovered alone: the
// epoch moves, so its next token exceeds every earlier one.
func TestRecoverAfterPermanentQuorumLoss(t *testing.T) {
	eachLogStore(t, recoverAfterPermanentQuorumLoss)
}

func recoverAfterPermanentQuorumLoss(t *testing.T, kind logstore.Kind) {
	c := tc.New(t, 3, tc.Options{LogStore: kind})
	leader := c.WaitLeader(10 * time.Second)
	mark := mustAcquire(t, leader, "writer", "w").Token
	if s, e := put(t, leader, "k", "v", "Fencing-Token", tok(mark)); s != http.StatusOK {
		t.Fatalf("put: %d %+v", s, e)
	}
	var last uint64
	for i := range 20 {
		last = mustAcquire(t, leader, fmt.Sprintf("after-%d", i), "w").Token
	}
	survivor := c.Nodes[0]
	tc.Poll(t, 10*time.Second, "survivor caught up", func() bool { return lastToken(survivor) == last })
	for _, n := range c.Nodes {
		c.Stop(n)
	}
	h, err := recovery.Recover(recovery.Options{
		DataDir: survivor.DataDir,
		ID:      survivor.ID,
		Members: []cluster.Peer{{ID: survivor.ID, RaftAddr: survivor.RaftAddr, HTTPAddr: survivor.HTTPAddr}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if h.Epoch != 1 || h.Locks != 0 {
		t.Fatalf("recovered header %+v, want epoch 1 and no held locks", h)
	}
	c.Nodes = []*tc.Node{survivor}
	c.Restart(survivor)
	l := c.WaitLeader(20 * time.Second)
	// A grant of the old epoch above the key's mark (the lost members may
	// have handed out more, and seen writes the survivor never did) is
	// refused as stale.
	refusesOldEpoch(t, l, "k", last, mark)
	g := mustAcquire(t, l, "l0", "w")
	if g.Token <= last || g.Token < 1<<entry.EpochShift {
		t.Fatalf("token after recovery %d, want above %d and in epoch 1", g.Token, last)
	}
	if s, e := put(t, l, "k", "new", "Fencing-Token", tok(g.Token)); s != http.StatusOK {
		t.Fatalf("the new grant's write after recovery: %d %+v", s, e)
	}
}

// refusesOldEpoch checks that a fenced write with token, a grant of the
// epoch before a restore or recovery that is above key's mark, is refused
// as any stale write is (409 stale_token, last_token the key's mark), and
// that the token is not current for the lock it was granted on.
func refusesOldEpoch(t *testing.T, n *tc.Node, key string, token, mark uint64) {
	t.Helper()
	if token <= mark {
		t.Fatalf("test setup: token %d is not above the mark %d", token, mark)
	}
	s, e := put(t, n, key, "zombie", "Fencing-Token", tok(token))
	if s != http.StatusConflict || e.Code != wire.CodeStaleToken || e.LastToken != mark {
		t.Fatalf("write with the old epoch's token %d over mark %d: %d %+v", token, mark, s, e)
	}
	status, body, _ := tc.Do(t, http.MethodGet, n.URL()+"/v1/locks/after-19/check?token="+tok(token), "")
	var cr wire.CheckResponse
	if err := json.Unmarshal([]byte(body), &cr); status != http.StatusOK || err != nil || cr.Current {
		t.Fatalf("check of the old epoch's token: %d %s", status, body)
	}
}

// A member that fell far behind catches up from a snapshot.
func TestLaggingMemberCatchesUpFromSnapshot(t *testing.T) {
	eachLogStore(t, laggingMemberCatchesUpFromSnapshot)
}

func laggingMemberCatchesUpFromSnapshot(t *testing.T, kind logstore.Kind) {
	c := tc.New(t, 3, tc.Options{LogStore: kind, Configure: func(cfg *cluster.Config) {
		cfg.SnapshotThreshold = 32
		cfg.TrailingLogs = 8
		cfg.SnapshotInterval = 100 * time.Millisecond
	}})
	leader := c.WaitLeader(10 * time.Second)
	lagger := c.Nodes[2]
	if lagger == leader {
		lagger = c.Nodes[1]
	}
	c.Stop(lagger)
	var last uint64
	for i := range 120 {
		last = mustAcquire(t, leader, fmt.Sprintf("s%d", i), "w").Token
	}
	tc.Poll(t, 20*time.Second, "leader compacted its log", func() bool {
		return lastSnapshotIndex(t, leader) > 1
	})
	c.Restart(lagger)
	tc.Poll(t, 30*time.Second, "lagger caught up", func() bool {
		return lastToken(lagger) == last
	})
	// Then to the same state: the member re-registers after its restart,
	// so the leader may apply an entry or two more than the grants.
	caughtUp(t, c, lagger)
	// It goes on taking entries after the snapshot (a store that refused
	// them would stop the member while its restored state looked right).
	next := mustAcquire(t, leader, "after-catch-up", "w").Token
	tc.Poll(t, 10*time.Second, "lagger applied an entry after the snapshot", func() bool {
		return lastToken(lagger) == next
	})
	select {
	case err := <-lagger.Inst.Node.Fatal():
		t.Fatalf("the caught-up member stopped: %v", err)
	default:
	}
}

// lastSnapshotIndex reads a node's latest snapshot index from its metrics.
func lastSnapshotIndex(t *testing.T, n *tc.Node) uint64 {
	return uint64(value(t, scrape(t, n), "fencer_raft_last_snapshot_index"))
}

// A non-voter joins and catches up without voting; the members API then
// promotes it to a voter.
func TestNonVoterCatchesUpThenIsPromoted(t *testing.T) {
	c := tc.New(t, 3)
	leader := c.WaitLeader(10 * time.Second)
	var last uint64
	for i := range 5 {
		last = mustAcquire(t, leader, fmt.Sprintf("nv%d", i), "w").Token
	}
	nv := c.Add("n4", func(cfg *cluster.Config) { cfg.NonVoter = true })
	c.WaitMembers(4, 30*time.Second)
	voter := func() (bool, bool) {
		st, _ := c.WaitLeader(10 * time.Second).Inst.Node.Status()
		for _, m := range st.Members {
			if m.ID == "n4" {
				return m.Voter, true
			}
		}
		return false, false
	}
	if v, ok := voter(); !ok || v {
		t.Fatalf("n4 voter=%v present=%v, want a non-voter", v, ok)
	}
	tc.Poll(t, 20*time.Second, "non-voter caught up", func() bool { return lastToken(nv) == last })
	admin, _ := client.New(endpoints(c))
	if err := admin.AddMember(context.Background(), "n4", nv.RaftAddr, nv.HTTPAddr, true); err != nil {
		t.Fatalf("promote: %v", err)
	}
	if v, _ := voter(); !v {
		t.Fatal("n4 was not promoted to a voter")
	}
	if g := mustAcquire(t, c.WaitLeader(10*time.Second), "after-promotion", "w"); g.Token <= last {
		t.Fatalf("token %d not above %d", g.Token, last)
	}
}
