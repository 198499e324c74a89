package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fencer-io/fencer/api/wire"
	tc "github.com/fencer-io/fencer/test/testcluster"
)

// Two "fencer exec --limit 2" run at once, each under a permit of its own;
// a third permit is refused while they run; "sem status" shows both, and
// "sem list" nothing once they are done. "sem acquire/release" by hand.
func TestExecUnderSemaphorePermits(t *testing.T) {
	newTestCluster(t).WaitReady(15 * time.Second)
	gate := filepath.Join(t.TempDir(), "go")
	script := `echo "sem=$FENCER_SEMAPHORE token=$FENCER_TOKEN"; while [ ! -e ` + gate + ` ]; do sleep 0.02; done`
	out1, _, done1 := startFencer(t, "exec", "crawlers", "--limit", "2", "--ttl", "5s", "--", "sh", "-c", script)
	out2, _, done2 := startFencer(t, "exec", "crawlers", "--limit", "2", "--ttl", "5s", "--", "sh", "-c", script)
	for _, o := range []*tc.SyncBuffer{out1, out2} {
		tc.Poll(t, 10*time.Second, "a child's token line", func() bool { return strings.Contains(o.String(), "sem=crawlers token=") })
	}
	if _, _, err := fencer(t, "", "sem", "acquire", "crawlers", "--limit", "2"); err == nil || !strings.Contains(err.Error(), wire.CodeSemaphoreFull) {
		t.Fatalf("a third permit: %v", err)
	}
	var st wire.SemaphoreStatus
	if err := json.Unmarshal([]byte(mustFencer(t, "sem", "status", "crawlers", "-o", "json")), &st); err != nil || st.Limit != 2 || len(st.Holders) != 2 {
		t.Fatalf("status %+v (%v)", st, err)
	}
	if err := os.WriteFile(gate, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, d := range []<-chan error{done1, done2} {
		if err := waitDone(t, d); err != nil {
			t.Fatal(err)
		}
	}
	if got := mustFencer(t, "sem", "list"); got != "" {
		t.Fatalf("sem list after both exited: %q", got)
	}
	var g wire.PermitGrant
	if err := json.Unmarshal([]byte(mustFencer(t, "sem", "acquire", "crawlers", "--limit", "1", "-o", "json")), &g); err != nil || g.Token == 0 || g.Held != 1 {
		t.Fatalf("sem acquire: %+v (%v)", g, err)
	}
	mustFencer(t, "sem", "renew", "crawlers", "--token", strconv.FormatUint(g.Token, 10), "--lease", g.Lease)
	mustFencer(t, "sem", "release", "crawlers", "--token", strconv.FormatUint(g.Token, 10), "--lease", g.Lease)
}

// "fencer elect" leads and runs the command with its term in FENCER_TOKEN;
// "fencer leader" shows it and its value; a second campaigner waits.
func TestElectAndLeader(t *testing.T) {
	newTestCluster(t).WaitReady(15 * time.Second)
	gate := filepath.Join(t.TempDir(), "go")
	script := `echo "term=$FENCER_TOKEN"; while [ ! -e ` + gate + ` ]; do sleep 0.02; done`
	watched := &tc.SyncBuffer{}
	watcher := newRootCmd(watched, &tc.SyncBuffer{})
	watcher.SetArgs([]string{"leader", "sched", "--watch"})
	watchCtx, stopWatching := context.WithCancel(t.Context())
	watchDone := make(chan error, 1)
	go func() { watchDone <- watcher.ExecuteContext(watchCtx) }()
	defer func() { stopWatching(); <-watchDone }()
	out, _, done := startFencer(t, "elect", "sched", "--value", "10.0.0.7:8080", "--ttl", "5s", "--", "sh", "-c", script)
	tc.Poll(t, 10*time.Second, "the leader's term line", func() bool { return strings.Contains(out.String(), "term=") })
	var st wire.LockStatus
	if err := json.Unmarshal([]byte(mustFencer(t, "leader", "sched", "-o", "json")), &st); err != nil || !st.Held || st.Value != "10.0.0.7:8080" ||
		!strings.Contains(out.String(), "term="+strconv.FormatUint(st.Token, 10)) {
		t.Fatalf("leader %+v (%v), child saw %q", st, err, out.String())
	}
	line := `value="10.0.0.7:8080"`
	tc.Poll(t, 10*time.Second, "leader --watch to print the term", func() bool {
		return strings.Contains(watched.String(), "term="+strconv.FormatUint(st.Token, 10)+" "+line)
	})
	if err := os.WriteFile(gate, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := waitDone(t, done); err != nil {
		t.Fatal(err)
	}
	if got := mustFencer(t, "leader", "sched"); got != "election=sched leader=none\n" {
		t.Fatalf("after the leader exited: %q", got)
	}
}
