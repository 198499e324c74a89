package main

import (
	"encoding/json"
	"strings"
	"testing"

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
