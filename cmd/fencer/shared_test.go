package main

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/fencer-io/fencer/api/client"
	"github.com/fencer-io/fencer/cmd/fencer/internal/cli"
	"github.com/fencer-io/fencer/fsm/entry"
	tc "github.com/fencer-io/fencer/test/testcluster"
)

// "fencer lock acquire --mode shared" takes a shared grant beside another,
// "fencer lock status" lists both, an exclusive acquire is refused as held,
// and a mode the server would refuse is a usage error.
func TestLockAcquireModeShared(t *testing.T) {
	c := newTestCluster(t)
	cl, err := client.New([]string{c.Nodes[0].HTTPAddr})
	if err != nil {
		t.Fatal(err)
	}
	tc.Poll(t, 10*time.Second, "log format 9", func() bool {
		st, err := cl.Cluster(context.Background())
		return err == nil && st.LogFormat == entry.LogFormat
	})
	for _, h := range []string{"r1", "r2"} {
		if out := mustFencer(t, "lock", "acquire", "table", "--mode", "shared", "--holder", h); !grantLine.MatchString(out) {
			t.Fatalf("shared acquire by %s: %q", h, out)
		}
	}
	out := mustFencer(t, "lock", "status", "table")
	if !strings.HasPrefix(out, `lock=table held=false mode=shared shared_holders="r1":`) || !strings.Contains(out, `,"r2":`) {
		t.Fatalf("status %q", out)
	}
	if _, _, err := fencer(t, "", "lock", "acquire", "table"); !errors.Is(err, client.ErrLockHeld) {
		t.Fatalf("exclusive acquire of a shared lock: %v", err)
	}
	_, _, err = fencer(t, "", "lock", "acquire", "table", "--mode", "read")
	var usage *cli.UsageError
	if !errors.As(err, &usage) {
		t.Fatalf("--mode read: %v, want a usage error", err)
	}
}
