package test

import (
	"errors"
	"os"
	"strings"
	"testing"
	"time"

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
