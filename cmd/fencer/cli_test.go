package main

import (
	"encoding/json"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"github.com/fencer-io/fencer/cmd/fencer/internal/cli"
	"github.com/fencer-io/fencer/internal/tlsutil"
	tc "github.com/fencer-io/fencer/test/testcluster"
)

// runFencer runs a command line as main does: exit status, stdout, stderr.
func runFencer(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errb tc.SyncBuffer
	code := run(args, strings.NewReader(""), &out, &errb)
	return code, out.String(), errb.String()
}

// A word that is not a subcommand fails, at every level, instead of
// printing help and exiting 0; a bare group still prints its help.
func TestUnknownCommandFails(t *testing.T) {
	for _, args := range [][]string{
		{"lock", "grab", "x"},
		{"kv", "bogus"},
		{"bogus"},
		{"members", "lst"},
		{"cluster", "stat"},
		{"snapshot", "take", "f"},
		{"tls", "make"},
		{"resource", "run"},
	} {
		code, out, stderr := runFencer(t, args...)
		parent := strings.Join(append([]string{"fencer"}, args[:len(args)-1]...), " ")
		if args[0] == "lock" || args[0] == "snapshot" {
			parent = "fencer " + args[0]
		}
		want := `unknown command "` + args[len(args)-1] + `" for "` + parent + `"`
		if args[0] == "lock" || args[0] == "snapshot" {
			want = `unknown command "` + args[1] + `" for "` + parent + `"`
		}
		if code == 0 || !strings.Contains(stderr, want) || out != "" {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want non-zero and %s", args, code, out, stderr, want)
		}
	}
	if _, _, stderr := runFencer(t, "members", "lst"); !strings.Contains(stderr, `did you mean "list"?`) {
		t.Errorf("no suggestion: %q", stderr)
	}
	if code, out, _ := runFencer(t, "lock"); code != 0 || !strings.Contains(out, "Available Commands") {
		t.Errorf("bare group: exit %d, %q", code, out)
	}
}

// A mistyped subcommand is suggested in every group, also when the flags
// of the command the user meant follow it (cobra parses them as the group's
// and would say only "unknown flag"); a real flag error of a subcommand
// stays a flag error.
func TestMistypedSubcommandSuggested(t *testing.T) {
	groups := 0
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		for _, sub := range c.Commands() {
			walk(sub)
		}
		if !c.HasSubCommands() {
			return
		}
		groups++
		path := strings.Fields(c.CommandPath())[1:]
		for _, sub := range c.Commands() {
			name := sub.Name()
			if len(name) < 4 || sub.Hidden {
				continue // one letter off a short name is another word
			}
			typo := name[:1] + name[2:] // "aquire", "memers"
			for _, tail := range [][]string{nil, {"x", "--ttl", "30s"}, {"--ttl", "30s", "-o", "json"}} {
				args := append(append(append([]string{}, path...), typo), tail...)
				code, out, stderr := runFencer(t, args...)
				var asJSON struct{ Error, Code string }
				if json.Unmarshal([]byte(stderr), &asJSON) == nil {
					stderr = asJSON.Error
				}
				want := regexp.MustCompile(`unknown command "` + typo + `" for "` + c.CommandPath() +
					`" \(did you mean (one of \[[^]]*)?"` + name + `"`)
				if code == 0 || out != "" || !want.MatchString(stderr) {
					t.Errorf("%v: exit %d, stdout %q, stderr %q; want %s", args, code, out, stderr, want)
				}
			}
		}
	}
	walk(newRootCmd(nil, nil))
	if groups < 8 {
		t.Fatalf("walked %d command groups; the tree has at least 8 (fencer, lock, sem, kv, members, cluster, snapshot, tls)", groups)
	}
	for _, args := range [][]string{{"lock", "acquire", "job", "--bogus"}, {"lock", "--bogus"}} {
		if code, _, stderr := runFencer(t, args...); code == 0 || !strings.Contains(stderr, "unknown flag: --bogus") {
			t.Errorf("%v: exit %d, %q; want the flag error", args, code, stderr)
		}
	}
}

func TestVersion(t *testing.T) {
	for _, args := range [][]string{{"version"}, {"--version"}} {
		code, out, _ := runFencer(t, args...)
		if code != 0 || !strings.HasPrefix(out, "fencer ") || !strings.Contains(out, runtime.Version()) || strings.Count(out, "\n") != 1 {
			t.Errorf("%v: exit %d, %q", args, code, out)
		}
	}
	code, out, _ := runFencer(t, "version", "-o", "json")
	var b buildInfo
	if err := json.Unmarshal([]byte(out), &b); code != 0 || err != nil || b.Go != runtime.Version() || b.Version == "" {
		t.Fatalf("version -o json: exit %d, %v, %q", code, err, out)
	}
	version = "v9.9.9"
	defer func() { version = "" }()
	if _, out, _ := runFencer(t, "--version"); !strings.HasPrefix(out, "fencer v9.9.9 (") {
		t.Errorf("-ldflags version not used: %q", out)
	}
}

// examplesPending are commands whose file another branch is rewriting; they
// get their examples there. The test fails once they have them, so that the
// entry is removed.
var examplesPending = map[string]bool{}

// Every command fencer defines shows an Examples section in its help.
// (cobra's own help and completion commands are not fencer's.)
func TestEveryCommandHasExamples(t *testing.T) {
	var walk func(c *cobra.Command)
	n := 0
	walk = func(c *cobra.Command) {
		if c.Name() == "help" || c.Name() == "completion" {
			return
		}
		n++
		if examplesPending[c.CommandPath()] {
			if c.Example != "" {
				t.Errorf("%q has examples now: remove it from examplesPending", c.CommandPath())
			}
		} else if strings.TrimSpace(c.Example) == "" {
			t.Errorf("%q has no examples", c.CommandPath())
		} else if code, out, _ := runFencer(t, append(strings.Fields(c.CommandPath())[1:], "--help")...); code != 0 || !strings.Contains(out, "Examples:\n") {
			t.Errorf("%q --help shows no examples: %q", c.CommandPath(), out)
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(newRootCmd(nil, nil))
	if n < 30 {
		t.Fatalf("walked %d commands; the tree is bigger than that", n)
	}
}

// A missing argument is named; so is one too many.
func TestMissingArgumentsAreNamed(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"lock", "acquire"}, "NAME is required"},
		{[]string{"lock", "status"}, "NAME is required"},
		{[]string{"lock", "renew", "--token", "1", "--lease", "x"}, "NAME is required"},
		{[]string{"kv", "put"}, "KEY and VALUE are required"},
		{[]string{"kv", "put", "k"}, "VALUE is required"},
		{[]string{"kv", "get"}, "KEY is required"},
		{[]string{"kv", "delete"}, "KEY is required"},
		{[]string{"exec"}, "NAME is required"},
		{[]string{"exec", "--", "true"}, "NAME is required"},
		{[]string{"exec", "job"}, "COMMAND is required"},
		{[]string{"snapshot", "save"}, "FILE is required"},
		{[]string{"members", "remove"}, "ID is required"},
		{[]string{"tls", "init"}, "DIR is required"},
		{[]string{"lock", "status", "a", "b"}, `unexpected argument "b"`},
		{[]string{"cluster", "transfer-leader", "n1", "n2"}, `unexpected argument "n2"`},
	} {
		code, _, stderr := runFencer(t, c.args...)
		if code == 0 || !strings.HasPrefix(stderr, "fencer: "+c.want) {
			t.Errorf("%v: exit %d, stderr %q; want %q", c.args, code, stderr, c.want)
		}
	}
}

// Under -o json an error is one JSON object on stderr, with a code: the
// CLI's own ("usage", "unavailable") when no server answered.
func TestJSONErrors(t *testing.T) {
	t.Setenv("FENCER_ENDPOINTS", "127.0.0.1:1") // nothing listens on port 1
	for _, c := range []struct {
		args []string
		code string
		msg  string
	}{
		{[]string{"lock", "acquire", "-o", "json"}, "usage", "NAME is required"},
		{[]string{"lock", "acquire", "x", "--bogus", "-o", "json"}, "usage", "unknown flag: --bogus"},
		{[]string{"lock", "acquire", "-o", "json", "x", "--ttl", "soon"}, "usage", "--ttl"},
		{[]string{"-o", "json", "lock", "grab"}, "usage", "unknown command"},
		{[]string{"lock", "list", "-ojson", "--timeout", "200ms"}, "unavailable", "cluster unavailable"},
		{[]string{"version", "--output=json", "extra"}, "usage", `unexpected argument "extra"`},
	} {
		code, out, stderr := runFencer(t, c.args...)
		var e cli.ErrorBody
		if err := json.Unmarshal([]byte(stderr), &e); err != nil || code == 0 || out != "" {
			t.Errorf("%v: exit %d, stdout %q, stderr %q: %v", c.args, code, out, stderr, err)
			continue
		}
		if e.Code != c.code || !strings.Contains(e.Error, c.msg) || strings.Count(stderr, "\n") != 1 {
			t.Errorf("%v: %+v, want code %q and %q", c.args, e, c.code, c.msg)
		}
	}
	// After "--", -o json belongs to exec's COMMAND.
	if cli.WantsJSON(nil, []string{"exec", "x", "--", "tool", "-o", "json"}) {
		t.Error("an -o json after -- was taken as fencer's")
	}
}

// The TLS and ACL flags have prefixed names; the old names still work, are
// hidden from help, and warn. So do the old environment variables.
func TestRenamedFlagsKeepTheirOldNames(t *testing.T) {
	t.Setenv("FENCER_ENDPOINTS", "127.0.0.1:1")
	dir := t.TempDir()
	missing := filepath.Join(dir, "missing")
	// A certificate is loaded with its key: each is named when it is missing.
	if err := tlsutil.GenerateDevPKI(dir, []string{"n1"}, nil); err != nil {
		t.Fatal(err)
	}
	cert, key := filepath.Join(dir, "client.pem"), filepath.Join(dir, "client-key.pem")
	for _, c := range []struct {
		flag, old string
		with      []string
		want      string
	}{
		{"--auth-token-file", "--token-file", nil, "--auth-token-file: open " + missing},
		{"--tls-ca", "--ca", nil, missing},
		{"--tls-cert", "--cert", []string{"--tls-key", key}, missing},
		{"--tls-key", "--key", []string{"--tls-cert", cert}, missing},
	} {
		_, _, stderr := runFencer(t, append([]string{"lock", "list", c.flag, missing}, c.with...)...)
		if !strings.Contains(stderr, c.want) || strings.Contains(stderr, "deprecated") {
			t.Errorf("%s: stderr %q, want %q", c.flag, stderr, c.want)
		}
		_, _, stderr = runFencer(t, append([]string{"lock", "list", c.old, missing}, c.with...)...)
		warning := "fencer: warning: " + c.old + " is deprecated and will be removed in the next release; use " + c.flag + "\n"
		if !strings.Contains(stderr, c.want) || !strings.HasPrefix(stderr, warning) {
			t.Errorf("%s: stderr %q, want %q and a deprecation warning", c.old, stderr, c.want)
		}
	}
	// Under -o json the warning is JSON too, on stderr; stdout stays clean.
	_, out, stderr := runFencer(t, "lock", "list", "-o", "json", "--ca", filepath.Join(dir, "ca.pem"), "--timeout", "100ms")
	if out != "" || !strings.HasPrefix(stderr, `{"warning":"--ca is deprecated`) {
		t.Errorf("json warning: stdout %q stderr %q", out, stderr)
	}
	_, help, _ := runFencer(t, "lock", "list", "--help")
	for _, old := range []string{"--token-file", "--ca ", "--cert ", "--key "} {
		if strings.Contains(help, old) {
			t.Errorf("help shows the old flag %s:\n%s", old, help)
		}
	}
	for _, env := range []string{"FENCER_AUTH_TOKEN_FILE", "FENCER_TOKEN_FILE"} {
		t.Run(env, func(t *testing.T) {
			t.Setenv(env, missing)
			if _, _, stderr := runFencer(t, "lock", "list"); !strings.Contains(stderr, "--auth-token-file: open "+missing) {
				t.Errorf("$%s ignored: %q", env, stderr)
			}
		})
	}
	// The new variable wins over the old one.
	t.Setenv("FENCER_TLS_CA", missing+"-new")
	t.Setenv("FENCER_CA", missing+"-old")
	if _, _, stderr := runFencer(t, "lock", "list"); !strings.Contains(stderr, missing+"-new") {
		t.Errorf("$FENCER_TLS_CA did not win: %q", stderr)
	}
}
