package main

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fencer-io/fencer/api/wire"
	"github.com/fencer-io/fencer/cmd/fencer/internal/cli"
)

// fencer lock revoke, sem revoke and session revoke end what they name
// (a second revoke is refused as revoked, exit code and all), and revoke
// without --token is a usage error that sends nothing.
func TestRevokeCommands(t *testing.T) {
	newTestCluster(t).WaitReady(15 * time.Second)
	var g wire.Grant
	json.Unmarshal([]byte(mustFencer(t, "lock", "acquire", "job", "--ttl", "30s", "--holder", "victim", "-o", "json")), &g)
	tok := strconv.FormatUint(g.Token, 10)
	if out := mustFencer(t, "lock", "revoke", "job", "--token", tok); out != "revoked token="+tok+" holder=\"victim\"\n" {
		t.Fatalf("lock revoke: %q", out)
	}
	for what, args := range map[string][]string{
		"a second revoke":              {"lock", "revoke", "job", "--token", tok},
		"renewal of the revoked grant": {"lock", "renew", "job", "--token", tok, "--lease", g.Lease},
	} {
		if code, _, stderr := runFencer(t, append(args, "-o", "json")...); code == 0 || !strings.Contains(stderr, `"code":"revoked"`) {
			t.Fatalf("%s: exit %d %s", what, code, stderr)
		}
	}
	var p wire.PermitGrant
	json.Unmarshal([]byte(mustFencer(t, "sem", "acquire", "workers", "--limit", "2", "-o", "json")), &p)
	var rv wire.RevokeResponse
	if err := json.Unmarshal([]byte(mustFencer(t, "sem", "revoke", "workers", "--token", strconv.FormatUint(p.Token, 10), "-o", "json")), &rv); err != nil || rv.Semaphore != "workers" || rv.Token != p.Token {
		t.Fatalf("sem revoke: %+v %v", rv, err)
	}
	var s wire.Session
	json.Unmarshal([]byte(mustFencer(t, "session", "create", "--ttl", "30s", "-o", "json")), &s)
	id := strconv.FormatUint(s.Session, 10)
	mustFencer(t, "lock", "acquire", "part", "--session", id, "--session-lease", s.Lease)
	if out := mustFencer(t, "session", "revoke", id); !strings.HasPrefix(out, "revoked session="+id+" ") || !strings.Contains(out, "grants=1\n  kind=lock name=part token=") {
		t.Fatalf("session revoke: %q", out)
	}
	code, out, stderr := runFencer(t, "lock", "revoke", "job", "-o", "json")
	var e cli.ErrorBody
	if err := json.Unmarshal([]byte(stderr), &e); err != nil || code == 0 || out != "" || e.Code != cli.CodeUsage || !strings.Contains(e.Error, "--token is required") {
		t.Fatalf("revoke without --token: exit %d, %q %q", code, out, stderr)
	}
}
