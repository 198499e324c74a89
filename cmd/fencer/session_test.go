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

// The session commands, and --session on the acquires, refuse a bad
// command line before they send anything: each with the usage code and
// what to give instead.
func TestSessionFlagsRefused(t *testing.T) {
	t.Setenv("FENCER_ENDPOINTS", "127.0.0.1:1") // nothing listens on port 1: nothing may be sent
	lease := strings.Repeat("a", 32)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"session", "renew", "--lease", lease}, "ID is required"},
		{[]string{"session", "renew", "abc", "--lease", lease}, `session id "abc": want a positive decimal integer`},
		{[]string{"session", "close", "012", "--lease", lease}, `session id "012"`},
		{[]string{"session", "status", "0"}, `session id "0"`},
		{[]string{"session", "renew", "7"}, "--lease is required"},
		{[]string{"session", "close", "7"}, "--lease is required"},
		{[]string{"session", "create", "--ttl", "0s"}, "--ttl 0s"},
		{[]string{"session", "create", "extra"}, `unexpected argument "extra"`},
		{[]string{"lock", "acquire", "job", "--session", "7"}, "--session needs --session-lease"},
		{[]string{"lock", "acquire", "job", "--session-lease", lease}, "--session-lease needs --session"},
		{[]string{"lock", "acquire", "job", "--session", "7", "--session-lease", lease, "--ttl", "5s"}, "--ttl and --session"},
		{[]string{"lock", "acquire", "job", "--session", "x7", "--session-lease", lease}, "--session"},
		{[]string{"sem", "acquire", "w", "--limit", "2", "--session", "7"}, "--session needs --session-lease"},
		{[]string{"sem", "acquire", "w", "--limit", "2", "--session", "7", "--session-lease", lease, "--ttl", "5s"}, "--ttl and --session"},
	} {
		code, out, stderr := runFencer(t, append(c.args, "-o", "json")...)
		var e cli.ErrorBody
		if err := json.Unmarshal([]byte(stderr), &e); err != nil || code == 0 || out != "" || e.Code != cli.CodeUsage || !strings.Contains(e.Error, c.want) {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want a usage error with %q", c.args, code, out, stderr, c.want)
		}
	}
}

// fencer session create, three lock acquires and a permit under it, renew,
// one release that keeps the rest, status and list, and close, which prints
// what it released; the grants' names are free again, and the session
// ended (session_expired).
func TestSessionCommands(t *testing.T) {
	newTestCluster(t).WaitReady(15 * time.Second)
	var s wire.Session
	if err := json.Unmarshal([]byte(mustFencer(t, "session", "create", "--ttl", "30s", "--holder", "svc-1", "-o", "json")), &s); err != nil || s.Session == 0 || len(s.Lease) != 32 || s.TTLMillis != 30000 {
		t.Fatalf("session create: %+v (%v)", s, err)
	}
	id := strconv.FormatUint(s.Session, 10)
	under := []string{"--session", id, "--session-lease", s.Lease}
	var grants []wire.Grant
	for _, name := range []string{"part-0", "part-1", "part-2"} {
		var g wire.Grant
		if err := json.Unmarshal([]byte(mustFencer(t, append([]string{"lock", "acquire", name, "-o", "json"}, under...)...)), &g); err != nil || g.Session != s.Session || g.Token <= s.Session {
			t.Fatalf("lock acquire %s under the session: %+v (%v)", name, g, err)
		}
		grants = append(grants, g)
	}
	if out := mustFencer(t, append([]string{"sem", "acquire", "loaders", "--limit", "2"}, under...)...); !grantLine.MatchString(out) {
		t.Fatalf("sem acquire under the session: %q", out)
	}
	if out := mustFencer(t, "session", "renew", id, "--lease", s.Lease); out != "session="+id+" ttl=30s\n" {
		t.Fatalf("session renew: %q", out)
	}
	mustFencer(t, "lock", "release", "part-1", "--token", strconv.FormatUint(grants[1].Token, 10), "--lease", grants[1].Lease)
	status := mustFencer(t, "session", "status", id)
	if !strings.HasPrefix(status, "session="+id+` holder="svc-1" ttl=30s remaining=`) || !strings.Contains(status, " grants=3\n") ||
		!strings.Contains(status, "  kind=lock name=part-0 token="+strconv.FormatUint(grants[0].Token, 10)+"\n") || strings.Contains(status, "part-1") {
		t.Fatalf("session status: %q", status)
	}
	var list wire.SessionList
	if err := json.Unmarshal([]byte(mustFencer(t, "session", "list", "-o", "json")), &list); err != nil || len(list.Sessions) != 1 || list.Sessions[0].Session != s.Session {
		t.Fatalf("session list: %+v (%v)", list, err)
	}
	out := mustFencer(t, "session", "close", id, "--lease", s.Lease)
	if !strings.HasPrefix(out, "closed session="+id+" released=3\n") || !strings.Contains(out, "  kind=semaphore name=loaders token=") {
		t.Fatalf("session close: %q", out)
	}
	if held, _ := lockHeld(t, "part-0"); held {
		t.Fatal("part-0 held after the close")
	}
	if _, _, err := fencer(t, "", "session", "renew", id, "--lease", s.Lease); err == nil || !strings.Contains(err.Error(), wire.CodeSessionExpired) {
		t.Fatalf("renew after close: %v", err)
	}
	if got := mustFencer(t, "session", "list"); got != "" {
		t.Fatalf("session list after close: %q", got)
	}
}
