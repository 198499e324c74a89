package main

import (
	"encoding/json"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/fencer-io/fencer/api/wire"
	"github.com/fencer-io/fencer/cmd/fencer/internal/cli"
	tc "github.com/fencer-io/fencer/test/testcluster"
)

// "fencer lock acquire --durable" and "fencer sem acquire --durable" queue
// a durable waiter behind the holder and print its grant with the index it
// queued at; --durable without --wait, or with several names, is a usage
// error.
func TestAcquireDurable(t *testing.T) {
	newTestCluster(t)
	for _, args := range [][]string{
		{"lock", "acquire", "job", "--durable"},
		{"sem", "acquire", "pool", "--limit", "1", "--durable"},
		{"lock", "acquire", "a", "b", "--durable"},
	} {
		var usage *cli.UsageError
		if _, _, err := fencer(t, "", args...); !errors.As(err, &usage) {
			t.Fatalf("%v: %v, want a usage error", args, err)
		}
	}
	m := grantLine.FindStringSubmatch(mustFencer(t, "lock", "acquire", "job", "--ttl", "30s"))
	if m == nil {
		t.Fatal("no grant")
	}
	type answer struct {
		out string
		err error
	}
	done := make(chan answer, 1)
	go func() {
		out, _, err := fencer(t, "", "lock", "acquire", "job", "--wait", "20s", "--durable", "--holder", "waiter", "-o", "json")
		done <- answer{out, err}
	}()
	tc.Poll(t, 10*time.Second, "the durable waiter to queue", func() bool { return lockStatus(t, "job").Waiters == 1 })
	mustFencer(t, "lock", "release", "job", "--token", m[1], "--lease", m[2])
	a := <-done
	var g wire.Grant
	if a.err != nil || json.Unmarshal([]byte(a.out), &g) != nil {
		t.Fatalf("durable acquire: %q (%v)", a.out, a.err)
	}
	if token, _ := strconv.ParseUint(m[1], 10, 64); g.Holder != "waiter" || g.WaitIndex == 0 || g.WaitIndex <= token || g.Token <= g.WaitIndex {
		t.Fatalf("durable grant %+v after token %s", g, m[1])
	}
}
