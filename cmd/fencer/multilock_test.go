package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/fencer-io/fencer/api/wire"
	"github.com/fencer-io/fencer/cmd/fencer/internal/cli"
)

// "fencer lock acquire A B C" takes every name with one token; another
// acquire over one of them is refused, naming it; status shows each held
// by that token; release of one name alone is refused; "fencer lock renew"
// and "release" with the names renew and free them all; one with --wait
// queues until a name's holder expires. Several names with --lock-delay or
// --session are refused before anything is sent.
func TestMultiLockCommands(t *testing.T) {
	t.Run("refused flags", func(t *testing.T) {
		t.Setenv("FENCER_ENDPOINTS", "127.0.0.1:1") // nothing may be sent
		for _, c := range []struct {
			args []string
			want string
		}{
			{[]string{"lock", "acquire", "a", "b", "--lock-delay", "1s"}, "--lock-delay"},
			{[]string{"lock", "acquire"}, "NAME is required"},
			{[]string{"lock", "release", "a", "b"}, "--token is required"},
		} {
			code, out, stderr := runFencer(t, append(c.args, "-o", "json")...)
			var e cli.ErrorBody
			if err := json.Unmarshal([]byte(stderr), &e); err != nil || code == 0 || out != "" || e.Code != cli.CodeUsage || !strings.Contains(e.Error, c.want) {
				t.Errorf("%v: exit %d, stdout %q, stderr %q; want a usage error with %q", c.args, code, out, stderr, c.want)
			}
		}
	})
	newTestCluster(t).WaitReady(15 * time.Second)
	var g wire.MultiGrant
	if err := json.Unmarshal([]byte(mustFencer(t, "lock", "acquire", "acct.a", "acct.b", "acct.c", "--ttl", "30s", "--holder", "mover", "-o", "json")), &g); err != nil || g.Token == 0 || len(g.Names) != 3 {
		t.Fatalf("multi-acquire: %+v (%v)", g, err)
	}
	if _, _, err := fencer(t, "", "lock", "acquire", "acct.x", "acct.b"); err == nil || !strings.Contains(err.Error(), wire.CodeLockHeld+`: lock "acct.b"`) {
		t.Fatalf("overlapping multi-acquire: %v", err)
	}
	for _, n := range g.Names {
		if out := mustFencer(t, "lock", "status", n); !strings.Contains(out, fmt.Sprintf("token=%d", g.Token)) || !strings.Contains(out, `holder="mover"`) {
			t.Fatalf("status of %s: %s", n, out)
		}
	}
	lease := []string{"--token", fmt.Sprint(g.Token), "--lease", g.Lease}
	if _, _, err := fencer(t, "", append([]string{"lock", "release", "acct.a"}, lease...)...); err == nil || !strings.Contains(err.Error(), wire.CodeMultiGrant) {
		t.Fatalf("release of one name: %v", err)
	}
	if out := mustFencer(t, append([]string{"lock", "renew", "acct.a", "acct.b", "acct.c"}, lease...)...); !strings.Contains(out, fmt.Sprintf("token=%d", g.Token)) {
		t.Fatalf("multi renew: %s", out)
	}
	mustFencer(t, append([]string{"lock", "release", "acct.a", "acct.b", "acct.c"}, lease...)...)
	if out := mustFencer(t, "lock", "acquire", "acct.b", "acct.x", "--ttl", "1s"); !strings.Contains(out, "locks=acct.b,acct.x") {
		t.Fatalf("multi-acquire after the release: %s", out)
	}
	if out := mustFencer(t, "lock", "acquire", "acct.x", "acct.y", "--wait", "20s"); !strings.Contains(out, "locks=acct.x,acct.y") {
		t.Fatalf("a waiting multi-acquire once acct.x expired: %s", out)
	}
}
