package main

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fencer-io/fencer/api/client"
	"github.com/fencer-io/fencer/api/wire"
	tc "github.com/fencer-io/fencer/test/testcluster"
)

// The waiters below queue behind a holder that crashed with a 2s TTL, so
// they wait about 2s: longer than their own 1s TTL.
const (
	crashedTTL = "2s"
	waiterTTL  = time.Second
)

// lockStatus reads a lock's status through the Go client at $FENCER_ENDPOINTS.
func lockStatus(t *testing.T, name string) wire.LockStatus {
	t.Helper()
	c, err := client.New(strings.Split(os.Getenv("FENCER_ENDPOINTS"), ","))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	st, err := c.Lock(t.Context(), name)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// "fencer lock acquire --wait" outwaits a crashed holder and prints a grant
// that can be renewed, again and again, past its TTL.
func TestLockAcquireWaitsOutCrashedHolder(t *testing.T) {
	newTestCluster(t)
	mustFencer(t, "lock", "acquire", "ex2", "--holder", "crashed", "--ttl", crashedTTL)
	start := time.Now()
	out := mustFencer(t, "lock", "acquire", "ex2", "--wait", "30s", "--ttl", waiterTTL.String(), "--holder", "waiter")
	waited := time.Since(start)
	m := grantLine.FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("acquire output %q", out)
	}
	token, secret := m[1], m[2]
	renewedAt := time.Now()
	for i := range 3 {
		// Let the lease age past half its TTL, then renew it.
		tc.Poll(t, 5*time.Second, "the lease to age", func() bool {
			st := lockStatus(t, "ex2")
			if !st.Held || strconv.FormatUint(st.Token, 10) != token {
				t.Fatalf("before renewal %d: %+v, want token %s held", i+1, st, token)
			}
			return st.RemainingMillis != nil && *st.RemainingMillis < waiterTTL.Milliseconds()/2
		})
		mustFencer(t, "lock", "renew", "ex2", "--token", token, "--lease", secret)
	}
	if held := time.Since(renewedAt); held < waiterTTL {
		t.Fatalf("renewed for only %v", held)
	}
	mustFencer(t, "lock", "release", "ex2", "--token", token, "--lease", secret)
	t.Logf("waited %v for the crashed holder, then renewed 3 times over %v", waited.Round(time.Millisecond), time.Since(renewedAt).Round(time.Millisecond))
}

// "fencer exec --wait" outwaits a crashed holder and keeps the lease, with
// the child running, for several TTLs.
func TestExecWaitsOutCrashedHolder(t *testing.T) {
	newTestCluster(t)
	mustFencer(t, "lock", "acquire", "ex2", "--holder", "crashed", "--ttl", crashedTTL)
	gate := filepath.Join(t.TempDir(), "go")
	script := `echo "child ran token=$FENCER_TOKEN"; while [ ! -e ` + gate + ` ]; do sleep 0.02; done`
	out, stderr, done := startFencer(t, "exec", "ex2", "--wait", "30s", "--ttl", waiterTTL.String(), "--", "sh", "-c", script)
	var token string
	tc.Poll(t, 15*time.Second, "the child to run", func() bool {
		select {
		case err := <-done:
			t.Fatalf("fencer exec returned before the child ran: %v (stderr %q)", err, stderr.String())
		default:
		}
		if _, after, ok := strings.Cut(out.String(), "child ran token="); ok {
			token, _, ok = strings.Cut(after, "\n")
			return ok
		}
		return false
	})
	started := time.Now()
	tc.Poll(t, 15*time.Second, "three TTLs under the lease", func() bool {
		select {
		case err := <-done:
			t.Fatalf("fencer exec returned while the child ran: %v (stderr %q)", err, stderr.String())
		default:
		}
		if st := lockStatus(t, "ex2"); !st.Held || strconv.FormatUint(st.Token, 10) != token {
			t.Fatalf("lock %+v while the child holds token %s", st, token)
		}
		return time.Since(started) > 3*waiterTTL
	})
	if err := os.WriteFile(gate, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := waitDone(t, done); err != nil {
		t.Fatalf("fencer exec: %v (stderr %q)", err, stderr.String())
	}
	if st := lockStatus(t, "ex2"); st.Held {
		t.Fatalf("lock still held after exec: %+v", st)
	}
}
