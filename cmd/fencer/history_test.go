package main

import (
	"encoding/json"
	"errors"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fencer-io/fencer/api/client"
	"github.com/fencer-io/fencer/api/wire"
	"github.com/fencer-io/fencer/cmd/fencer/internal/cli"
	tc "github.com/fencer-io/fencer/test/testcluster"
)

func TestLockHistoryAndTokenCommands(t *testing.T) {
	c := newTestCluster(t)
	c.WaitReady(15 * time.Second)
	m := grantLine.FindStringSubmatch(mustFencer(t, "lock", "acquire", "hjob", "--ttl", "30s", "--holder", "first"))
	if m == nil {
		t.Fatal("acquire")
	}
	token, lease := m[1], m[2]
	mustFencer(t, "lock", "release", "hjob", "--token", token, "--lease", lease)
	second := grantLine.FindStringSubmatch(mustFencer(t, "lock", "acquire", "hjob", "--ttl", "30s", "--holder", "second"))[1]

	var out string
	tc.Poll(t, 5*time.Second, "both grants in the history", func() bool {
		out = mustFencer(t, "lock", "history", "hjob")
		return strings.Count(out, "\n") == 2
	})
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if lines[0] != "token="+second+` holder="second" granted_index=`+second+" ended=held" ||
		!strings.HasPrefix(lines[1], "token="+token+` holder="first" granted_index=`+token+" ended=released ended_index=") {
		t.Fatalf("history:\n%s", out)
	}
	var hist wire.LockHistory
	if err := json.Unmarshal([]byte(mustFencer(t, "lock", "history", "hjob", "--limit", "1", "-o", "json")), &hist); err != nil ||
		hist.Lock != "hjob" || len(hist.Grants) != 1 || strconv.FormatUint(hist.Grants[0].Token, 10) != second {
		t.Fatalf("history -o json: %+v %v", hist, err)
	}
	tc.Poll(t, 5*time.Second, "the token on the member asked", func() bool {
		_, _, err := fencer(t, "", "token", token)
		return err == nil
	})
	if out := mustFencer(t, "token", token); !strings.HasPrefix(out, "token="+token+` lock=hjob holder="first" granted_index=`+token+" ended=released ended_index=") {
		t.Fatalf("token: %q", out)
	}
	_, _, err := fencer(t, "", "token", "999999999")
	if !errors.Is(err, client.ErrUnknownToken) || !strings.Contains(err.Error(), wire.ReasonNeverGranted) {
		t.Fatalf("an unknown token: %v", err)
	}
	var usage *cli.UsageError
	if _, _, err := fencer(t, "", "token", "07"); !errors.As(err, &usage) {
		t.Fatalf("a malformed token: %v", err)
	}
	// A permit's token names its semaphore.
	permit := regexp.MustCompile(`^token=(\d+) `).FindStringSubmatch(mustFencer(t, "sem", "acquire", "hpool", "--limit", "2", "--ttl", "30s", "--holder", "third"))
	if permit == nil {
		t.Fatal("sem acquire")
	}
	tc.Poll(t, 5*time.Second, "the permit's token on the member asked", func() bool {
		_, _, err := fencer(t, "", "token", permit[1])
		return err == nil
	})
	if out := mustFencer(t, "token", permit[1]); out != "token="+permit[1]+` semaphore=hpool holder="third" granted_index=`+permit[1]+" ended=held\n" {
		t.Fatalf("a permit's token: %q", out)
	}
}
