package test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fencer-io/fencer/api/wire"
	"github.com/fencer-io/fencer/cluster"
	"github.com/fencer-io/fencer/cluster/datadir"
	"github.com/fencer-io/fencer/cluster/logstore"
	"github.com/fencer-io/fencer/fsm"
	tc "github.com/fencer-io/fencer/test/testcluster"
)

// eachLogStore runs a crash, restart or recovery test once per kind of log
// store: wal is offered only because these pass on it as on bolt.
func eachLogStore(t *testing.T, test func(t *testing.T, kind logstore.Kind)) {
	for _, kind := range logstore.Kinds {
		t.Run(string(kind), func(t *testing.T) { test(t, kind) })
	}
}

// A running node holds its data dir: a second node on it is refused at
// once. A stopped wal node started as bolt is refused with how to convert
// it, and nothing of its state is touched: started as wal, it goes on.
func TestDataDirKeepsItsLogStore(t *testing.T) {
	c := tc.New(t, 1, tc.Options{LogStore: logstore.WAL})
	n := c.WaitLeader(10 * time.Second)
	last := mustAcquire(t, n, "before", "w").Token

	again := cluster.Config{ID: n.ID, DataDir: n.DataDir, RaftAddr: "127.0.0.1:0", HTTPAddr: "127.0.0.1:1", LogStore: logstore.WAL}
	if _, err := cluster.Open(again, fsm.New(nil)); !errors.Is(err, datadir.ErrInUse) {
		t.Fatalf("a second node on a running node's data dir: %v", err)
	}

	c.Stop(n)
	again.LogStore = logstore.Bolt
	_, err := cluster.Open(again, fsm.New(nil))
	if !errors.Is(err, logstore.ErrWrongKind) || !strings.Contains(err.Error(), "fencer migrate-log-store --data-dir "+n.DataDir+" --to bolt") {
		t.Fatalf("a wal data dir started as bolt: %v", err)
	}
	if _, err := os.Stat(logstore.Path(n.DataDir, logstore.Bolt)); err == nil {
		t.Fatal("the refused start created a bolt store")
	}
	c.Restart(n)
	if g := mustAcquire(t, c.WaitLeader(10*time.Second), "after", "w"); g.Token <= last {
		t.Fatalf("token %d after the refused start, not above %d", g.Token, last)
	}
}

// grantLog is what a client was told: each lock it was granted, and the
// token, in the order the answers came.
type grantLog struct {
	mu     sync.Mutex
	grants []wire.Grant
	err    error // the first token that did not exceed the one before
}

func (g *grantLog) add(gr wire.Grant) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if n := len(g.grants); n > 0 && gr.Token <= g.grants[n-1].Token && g.err == nil {
		g.err = fmt.Errorf("token %d granted after %d", gr.Token, g.grants[n-1].Token)
	}
	g.grants = append(g.grants, gr)
}

func (g *grantLog) snapshot() ([]wire.Grant, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return slices.Clone(g.grants), g.err
}

// rollingAcquires takes a new lock after another through whichever of addrs
// answers, one at a time, until stop is closed, and logs every grant.
func rollingAcquires(addrs []string, log *grantLog, stop <-chan struct{}, done chan<- struct{}) {
	defer close(done)
	hc := &http.Client{Timeout: 2 * time.Second}
	for i := 0; ; i++ {
		select {
		case <-stop:
			return
		default:
		}
		addr := addrs[i%len(addrs)]
		body := fmt.Sprintf(`{"holder":"w","ttl_ms":300000,"request_id":"rolling-%d-%d"}`, i, time.Now().UnixNano())
		resp, err := hc.Post("http://"+addr+fmt.Sprintf("/v1/locks/rolling-%d/acquire", i), "application/json", strings.NewReader(body))
		if err != nil {
			continue // that member is down: the next lock goes to the next one
		}
		var g wire.Grant
		if resp.StatusCode == http.StatusOK && json.NewDecoder(resp.Body).Decode(&g) == nil {
			log.add(g)
		}
		resp.Body.Close()
	}
}

// A 3-member bolt cluster is converted to wal one member at a time under a
// steady stream of acquires, as docs/operations.md says (stop, migrate,
// start with the new kind, wait until it has caught up), and one member is
// converted back: bolt and wal members run together meanwhile. Every grant
// a client was told of is still held with its token at the end, on every
// member, and tokens kept increasing.
func TestRollingLogStoreMigration(t *testing.T) {
	c := tc.New(t, 3)
	c.WaitLeader(10 * time.Second)
	var addrs []string
	for _, n := range c.Nodes {
		addrs = append(addrs, n.HTTPAddr)
	}
	var grants grantLog
	stop, done := make(chan struct{}), make(chan struct{})
	go rollingAcquires(addrs, &grants, stop, done)
	defer func() { close(stop); <-done }()
	progress := func(what string) {
		t.Helper()
		before, _ := grants.snapshot()
		tc.Poll(t, 20*time.Second, "grants "+what, func() bool {
			now, _ := grants.snapshot()
			return len(now) >= len(before)+5
		})
	}
	convert := func(n *tc.Node, to logstore.Kind) {
		t.Helper()
		progress("before " + n.ID + " stops")
		c.StopGracefully(n)
		res, err := logstore.Migrate(n.DataDir, to, nil)
		if err != nil || !res.Changed || res.Last == 0 {
			t.Fatalf("migrate %s to %s: %+v %v", n.ID, to, res, err)
		}
		c.Restart(n, func(cfg *cluster.Config) { cfg.LogStore = to })
		applied, _ := grants.snapshot()
		tc.Poll(t, 20*time.Second, n.ID+" caught up", func() bool {
			return lastToken(n) >= applied[len(applied)-1].Token
		})
		progress("after " + n.ID + " is back on " + string(to))
	}
	for _, n := range c.Nodes {
		convert(n, logstore.WAL)
	}
	convert(c.Nodes[0], logstore.Bolt)
	close(stop)
	<-done
	stop = make(chan struct{}) // for the deferred close

	all, err := grants.snapshot()
	if err != nil {
		t.Fatal(err)
	}
	leader := c.WaitLeader(10 * time.Second)
	for _, n := range c.Nodes {
		caughtUp(t, c, n)
	}
	for _, g := range all {
		for _, n := range c.Nodes {
			st, err := n.Inst.Coord.Lock(context.Background(), g.Lock, true)
			if err != nil || !st.Held || st.Token != g.Token {
				t.Fatalf("%s: grant %s token %d lost: %+v %v", n.ID, g.Lock, g.Token, st, err)
			}
		}
	}
	for i, want := range []logstore.Kind{logstore.Bolt, logstore.WAL, logstore.WAL} {
		ident, _ := datadir.ReadIdentity(c.Nodes[i].DataDir)
		if ident.LogStore != string(want) {
			t.Fatalf("%s records %q, want %s", c.Nodes[i].ID, ident.LogStore, want)
		}
	}
	t.Logf("%d grants across 4 conversions, tokens %d..%d, leader %s", len(all), all[0].Token, all[len(all)-1].Token, leader.ID)
}
