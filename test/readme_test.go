package test

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	tc "github.com/fencer-io/fencer/test/testcluster"
)

// The README's quick start, as pasted: its shell blocks run in one bash
// session against a real `fencer dev` cluster started from the built binary,
// and the outcomes the README promises are checked: Alice's write with her
// token is accepted, Bob gets a greater token once her lease runs out, her
// late write is refused as stale, Bob's value stays, and fencer exec hands
// its command a token. The README's Go program is then compiled from the
// README's own text and run against the same cluster.
func TestReadmeQuickStart(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and runs a cluster")
	}
	for _, tool := range []string{"bash", "curl", "sed"} {
		requireTool(t, tool)
	}
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	blocks := fencedBlocks(section(string(readme), "## Try it"), "sh")
	if len(blocks) < 3 || strings.TrimSpace(blocks[0]) != "make run" {
		t.Fatalf("the quick start should open with a block holding only `make run`, then the blocks to paste; found %q", blocks)
	}
	script := strings.Join(blocks[1:], "\n")

	// The cluster runs on free ports rather than 7001-7003 and 8001-8003,
	// which another cluster on this machine may hold; the script's
	// addresses are moved with it, and the CLI is pointed at it with
	// FENCER_ENDPOINTS.
	work := t.TempDir()
	bin := tc.BuildFencer(t, work)
	dev := tc.StartDev(t, bin, tc.FreeDevPorts(t, 3), nil, "--ephemeral")
	t.Cleanup(func() { dev.Stop(t, syscall.SIGTERM) })
	httpPort := dev.Ports().HTTP
	var endpoints []string
	for i := range 3 {
		endpoints = append(endpoints, "127.0.0.1:"+strconv.Itoa(httpPort+i))
	}
	moved := regexp.MustCompile(`localhost:700([1-3])\b`).ReplaceAllStringFunc(script, func(m string) string {
		n, _ := strconv.Atoi(m[len(m)-1:])
		return "localhost:" + strconv.Itoa(httpPort+n-1)
	})
	if regexp.MustCompile(`\b(700[0-9]|800[0-9])\b`).MatchString(moved) {
		t.Fatalf("the quick start names a dev cluster port this test does not move:\n%s", moved)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	sh := exec.CommandContext(ctx, "bash", "-c", "set -euo pipefail\n"+moved)
	sh.Dir = work
	sh.Env = append(os.Environ(), "FENCER_ENDPOINTS="+strings.Join(endpoints, ","))
	start := time.Now()
	outBytes, err := sh.CombinedOutput()
	out := string(outBytes)
	if err != nil {
		t.Fatalf("the quick start failed after %v: %v\n--- output\n%s\n--- dev cluster log\n%s", time.Since(start).Round(time.Millisecond), err, out, dev.Stderr.String())
	}
	t.Logf("quick start ran in %v:\n%s", time.Since(start).Round(time.Millisecond), out)
	checkQuickStart(t, out)

	// Every error code the README's comments show is one the quick start
	// really produced.
	for _, m := range regexp.MustCompile(`(?m)^#.*"code":"([a-z_]+)"`).FindAllStringSubmatch(script, -1) {
		if !strings.Contains(out, `"code":"`+m[1]+`"`) {
			t.Errorf("the README shows code %q, the quick start did not produce it", m[1])
		}
	}

	t.Run("GoProgram", func(t *testing.T) {
		runReadmeGoProgram(t, string(readme), "## Use it from Go", "quickstart", work, endpoints,
			regexp.MustCompile(`^wrote "report" with fencing token [1-9]\d*\n$`))
	})
	t.Run("Primitives", func(t *testing.T) {
		runReadmePrimitives(t, string(readme), work, httpPort, endpoints)
	})
	t.Run("Sessions", func(t *testing.T) {
		runReadmeSessions(t, string(readme), work, httpPort)
		runReadmeRevoke(t, string(readme), work, httpPort)
	})
	t.Run("MultiLocks", func(t *testing.T) {
		runReadmeMultiLocks(t, string(readme), work, httpPort)
	})
	t.Run("SharedLocks", func(t *testing.T) {
		runReadmeShared(t, string(readme), work, httpPort)
	})
}

// runReadmeShared runs the shell block of the README's shared locks
// section against the quick start's cluster and checks what it promises:
// two shared grants listed as the lock's shared holders, the check's mode,
// a shared grant's lock-bound write refused, and the queued writer granted
// with a token above both readers'.
func runReadmeShared(t *testing.T, readme, work string, httpPort int) {
	const heading = "## Shared locks: many readers or one writer"
	blocks := fencedBlocks(section(readme, heading), "sh")
	if len(blocks) != 1 {
		t.Fatalf("want one shell block under %q, found %d", heading, len(blocks))
	}
	script := regexp.MustCompile(`localhost:700([1-3])\b`).ReplaceAllStringFunc(blocks[0], func(m string) string {
		n, _ := strconv.Atoi(m[len(m)-1:])
		return "localhost:" + strconv.Itoa(httpPort+n-1)
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	sh := exec.CommandContext(ctx, "bash", "-c", "set -euo pipefail\n"+script)
	sh.Dir = work
	outBytes, err := sh.CombinedOutput()
	out := string(outBytes)
	if err != nil {
		t.Fatalf("the README's shared locks block failed: %v\n%s", err, out)
	}
	t.Logf("shared locks:\n%s", out)
	r1 := regexp.MustCompile(`\{"lock":"table","holder":"reader-1","token":([1-9]\d*),.*"mode":"shared"\}`).FindStringSubmatch(out)
	if r1 == nil {
		t.Fatalf("no shared grant of table to reader-1:\n%s", out)
	}
	first, _ := strconv.ParseUint(r1[1], 10, 64)
	for _, want := range []string{
		`"held":false,.*"shared_holders":\[\{"holder":"reader-1","token":` + r1[1] + `,.*\{"holder":"reader-2"`,
		`(?m)^\{"current":true,"token":0,"mode":"shared"\}$`,
		`token ` + r1[1] + ` is a shared grant of lock \\"table\\": a shared grant cannot write.*"code":"not_lock_holder"`,
	} {
		if !regexp.MustCompile(want).MatchString(out) {
			t.Errorf("the README's shared locks block did not print %s", want)
		}
	}
	w := regexp.MustCompile(`(?m)^\{"lock":"table","holder":"writer","token":([1-9]\d*),`).FindStringSubmatch(out)
	if w == nil {
		t.Fatalf("the writer was not granted:\n%s", out)
	}
	if token, _ := strconv.ParseUint(w[1], 10, 64); token <= first+1 {
		t.Errorf("the writer's token %d is not above both readers' (%d, %d)", token, first, first+1)
	}
}

// runReadmeMultiLocks runs the shell block of the README's multi-locks
// section, as pasted but for the ports, and checks what it promises: both
// names granted with one token, the overlapping request refused naming the
// held name with that token, the fenced write under one name accepted with
// it, and the release naming both.
func runReadmeMultiLocks(t *testing.T, readme, work string, httpPort int) {
	const heading = "## Multi-locks: several locks at once, all or none"
	blocks := fencedBlocks(section(readme, heading), "sh")
	if len(blocks) != 1 {
		t.Fatalf("want one shell block under %q, found %d", heading, len(blocks))
	}
	script := regexp.MustCompile(`localhost:700([1-3])\b`).ReplaceAllStringFunc(blocks[0], func(m string) string {
		n, _ := strconv.Atoi(m[len(m)-1:])
		return "localhost:" + strconv.Itoa(httpPort+n-1)
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	sh := exec.CommandContext(ctx, "bash", "-c", "set -euo pipefail\n"+script)
	sh.Dir = work
	outBytes, err := sh.CombinedOutput()
	out := string(outBytes)
	if err != nil {
		t.Fatalf("the README's multi-locks block failed: %v\n%s", err, out)
	}
	t.Logf("multi-locks:\n%s", out)
	granted := regexp.MustCompile(`\{"names":\["acct.alice","acct.bob"\],"holder":"transfer-7","token":([1-9]\d*),"lease":"[0-9a-f]{32}"`).FindStringSubmatch(out)
	if granted == nil {
		t.Fatalf("the README's multi-locks block granted no multi-lock:\n%s", out)
	}
	token := granted[1]
	for _, want := range []string{
		`"code":"lock_held","lock":"acct.bob","holder":"transfer-7","token":` + token + `\}`,
		`(?m)^\{"key":"ledger","token":` + token + `\}$`,
		`(?m)^\{"names":\["acct.alice","acct.bob"\],"token":` + token + `,"released":true\}$`,
	} {
		if !regexp.MustCompile(want).MatchString(out) {
			t.Errorf("the README's multi-locks block did not print %s", want)
		}
	}
}

// runReadmeSessions runs the shell block of the README's sessions section,
// as pasted but for the ports, against the quick start's cluster, and
// checks what it promises: the lock acquired under the session names it,
// the session's renewal answers its TTL, and its close releases the lock
// and the permit, each by its own token.
func runReadmeSessions(t *testing.T, readme, work string, httpPort int) {
	const heading = "## Sessions: one lease for many grants"
	blocks := fencedBlocks(section(readme, heading), "sh")
	if len(blocks) != 1 {
		t.Fatalf("want one shell block under %q, found %d", heading, len(blocks))
	}
	script := regexp.MustCompile(`localhost:700([1-3])\b`).ReplaceAllStringFunc(blocks[0], func(m string) string {
		n, _ := strconv.Atoi(m[len(m)-1:])
		return "localhost:" + strconv.Itoa(httpPort+n-1)
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	sh := exec.CommandContext(ctx, "bash", "-c", "set -euo pipefail\n"+script)
	sh.Dir = work
	outBytes, err := sh.CombinedOutput()
	out := string(outBytes)
	if err != nil {
		t.Fatalf("the README's sessions block failed: %v\n%s", err, out)
	}
	t.Logf("sessions:\n%s", out)
	created := regexp.MustCompile(`\{"session":([1-9]\d*),"holder":"indexer-7","lease":"[0-9a-f]{32}"`).FindStringSubmatch(out)
	if created == nil {
		t.Fatalf("the README's sessions block created no session:\n%s", out)
	}
	id := created[1]
	lock := regexp.MustCompile(`\{"lock":"shard.1","holder":"indexer-7","token":([1-9]\d*),.*"session":` + id + `\}`).FindStringSubmatch(out)
	if lock == nil {
		t.Fatalf("no grant of shard.1 under session %s:\n%s", id, out)
	}
	for _, want := range []string{
		`(?m)^\{"session":` + id + `,"ttl_ms":15000\}$`,
		`(?m)^\{"session":` + id + `,"released":\[\{"kind":"lock","name":"shard.1","token":` + lock[1] + `\},\{"kind":"semaphore","name":"uploads","token":[1-9]\d*\}\]\}$`,
	} {
		if !regexp.MustCompile(want).MatchString(out) {
			t.Errorf("the README's sessions block did not print %s", want)
		}
	}
}

// runReadmeRevoke runs the shell block of the README's revoke section, as
// pasted but for the ports, and checks what it promises: the revoke
// answers the grant it ended, the holder's renewal is refused as revoked,
// and its lock-bound write with the old token is refused.
func runReadmeRevoke(t *testing.T, readme, work string, httpPort int) {
	const heading = "## Revoke: end a stuck holder's grant"
	blocks := fencedBlocks(section(readme, heading), "sh")
	if len(blocks) != 1 {
		t.Fatalf("want one shell block under %q, found %d", heading, len(blocks))
	}
	script := regexp.MustCompile(`localhost:700([1-3])\b`).ReplaceAllStringFunc(blocks[0], func(m string) string {
		n, _ := strconv.Atoi(m[len(m)-1:])
		return "localhost:" + strconv.Itoa(httpPort+n-1)
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	sh := exec.CommandContext(ctx, "bash", "-c", "set -euo pipefail\n"+script)
	sh.Dir = work
	outBytes, err := sh.CombinedOutput()
	out := string(outBytes)
	if err != nil {
		t.Fatalf("the README's revoke block failed: %v\n%s", err, out)
	}
	t.Logf("revoke:\n%s", out)
	for _, want := range []string{
		`(?m)^\{"lock":"nightly","holder":"stuck-worker","token":[1-9]\d*\}$`,
		`"code":"revoked"`,
		`"code":"not_lock_holder"`,
	} {
		if !regexp.MustCompile(want).MatchString(out) {
			t.Errorf("the README's revoke block did not print %s", want)
		}
	}
}

// runReadmePrimitives runs the shell blocks of the README's elections,
// semaphores and lock-delay section, as pasted but for the ports, against
// the quick start's cluster, checks what they promise, and then runs the
// section's Go program.
func runReadmePrimitives(t *testing.T, readme, work string, httpPort int, endpoints []string) {
	const heading = "## Elections, semaphores and lock-delay"
	blocks := fencedBlocks(section(readme, heading), "sh")
	if len(blocks) != 3 {
		t.Fatalf("want a shell block for each of the three primitives under %q, found %d", heading, len(blocks))
	}
	script := regexp.MustCompile(`localhost:700([1-3])\b`).ReplaceAllStringFunc(strings.Join(blocks, "\n"), func(m string) string {
		n, _ := strconv.Atoi(m[len(m)-1:])
		return "localhost:" + strconv.Itoa(httpPort+n-1)
	})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	sh := exec.CommandContext(ctx, "bash", "-c", "set -euo pipefail\n"+script)
	sh.Dir = work
	sh.Env = append(os.Environ(), "FENCER_ENDPOINTS="+strings.Join(endpoints, ","))
	outBytes, err := sh.CombinedOutput()
	out := string(outBytes)
	if err != nil {
		t.Fatalf("the README's primitives failed: %v\n%s", err, out)
	}
	t.Logf("primitives:\n%s", out)
	for _, want := range []string{
		`"value":"10.0.0.7:8080"`,
		`(?m)^election=scheduler leader="node-a" term=[1-9]\d* value="10.0.0.7:9090"$`,
		`(?m)^leading in term [1-9]\d*$`,
		`"held":1`,
		`(?m)^semaphore=crawlers limit=2 held=2 waiters=0$`,
		`(?m)^crawling under permit [1-9]\d*$`,
		`"code":"lock_delay","retry_after_ms":[1-9]\d*`,
		`(?m)^lock=migrate held=false lock_delay_remaining=`,
		`(?m)^migrating with token [1-9]\d*$`,
	} {
		if !regexp.MustCompile(want).MatchString(out) {
			t.Errorf("the README's primitives did not print %s", want)
		}
	}
	for _, m := range regexp.MustCompile(`(?m)^#.*"code":"([a-z_]+)"`).FindAllStringSubmatch(script, -1) {
		if !strings.Contains(out, `"code":"`+m[1]+`"`) {
			t.Errorf("the README shows code %q, its primitives did not produce it", m[1])
		}
	}
	runReadmeGoProgram(t, readme, heading, "primitives", work, endpoints, regexp.MustCompile(
		`^leading exporter-leader in term [1-9]\d*, publishing 10.0.0.9:9090\n`+
			`holding a permit of exporters with token [1-9]\d*\n`+
			`holding nightly-export with token [1-9]\d* and a 5s lock-delay\n$`))
}

// checkQuickStart reads the quick start's output line by line, in order.
func checkQuickStart(t *testing.T, out string) {
	t.Helper()
	lines := strings.Split(strings.TrimSpace(out), "\n")
	next := 0
	expect := func(what string, re *regexp.Regexp) []string {
		t.Helper()
		for ; next < len(lines); next++ {
			if m := re.FindStringSubmatch(lines[next]); m != nil {
				next++
				return m
			}
		}
		t.Fatalf("quick start output: no %s (%s) in order\n%s", what, re, out)
		return nil
	}
	token := func(s string) uint64 {
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	var grant struct {
		Holder string `json:"holder"`
		Token  uint64 `json:"token"`
		Lease  string `json:"lease"`
	}
	alice := expect("Alice's grant", regexp.MustCompile(`^\{"lock":"report","holder":"alice".*\}$`))
	if err := json.Unmarshal([]byte(alice[0]), &grant); err != nil || grant.Token == 0 || grant.Lease == "" {
		t.Fatalf("Alice's grant %q: %v", alice[0], err)
	}
	aliceToken := grant.Token
	expect("Alice's write accepted", regexp.MustCompile(`^\{"key":"report","token":`+strconv.FormatUint(aliceToken, 10)+`\}$`))
	bob := expect("Bob's grant", regexp.MustCompile(`^\{"lock":"report","holder":"bob".*\}$`))
	if err := json.Unmarshal([]byte(bob[0]), &grant); err != nil || grant.Token <= aliceToken {
		t.Fatalf("Bob's grant %q (Alice had %d): %v", bob[0], aliceToken, err)
	}
	bobToken := grant.Token
	expect("Bob's write accepted", regexp.MustCompile(`^\{"key":"report","token":`+strconv.FormatUint(bobToken, 10)+`\}$`))
	stale := expect("Alice's late write refused", regexp.MustCompile(`"code":"stale_token","last_token":(\d+)`))
	if token(stale[1]) != bobToken {
		t.Fatalf("stale write refused against last token %s, want Bob's %d", stale[1], bobToken)
	}
	expect("Bob's value read back", regexp.MustCompile(`^final by bob$`))
	status := expect("the lock's status", regexp.MustCompile(`holder="bob" token=(\d+)`))
	if token(status[1]) != bobToken {
		t.Fatalf("status shows token %s, want Bob's %d", status[1], bobToken)
	}
	expect("Bob's release", regexp.MustCompile(`released.*\b`+strconv.FormatUint(bobToken, 10)+`\b`))
	execd := expect("fencer exec's command", regexp.MustCompile(`^running with fencing token (\d+)$`))
	if token(execd[1]) <= bobToken {
		t.Fatalf("fencer exec ran with token %s, not above Bob's %d", execd[1], bobToken)
	}
}

// runReadmeGoProgram compiles the Go block under heading itself (an overlay
// puts it in place of examples/NAME/main.go, so it builds inside this
// module) and runs it against the cluster; its output must match want.
// examples/NAME must hold the same text, so that `go run ./examples/NAME` is
// what the README shows.
func runReadmeGoProgram(t *testing.T, readme, heading, name, work string, endpoints []string, want *regexp.Regexp) {
	t.Helper()
	blocks := fencedBlocks(section(readme, heading), "go")
	if len(blocks) != 1 {
		t.Fatalf("want one Go block under %q, found %d", heading, len(blocks))
	}
	src, err := filepath.Abs("../examples/" + name + "/main.go")
	if err != nil {
		t.Fatal(err)
	}
	if file, err := os.ReadFile(src); err != nil || string(file) != blocks[0] {
		t.Errorf("examples/%s/main.go differs from the README's Go block (%v): copy the block into the file", name, err)
	}
	block := filepath.Join(work, name+"-readme-main.go")
	overlay := filepath.Join(work, name+"-overlay.json")
	if err := os.WriteFile(block, []byte(blocks[0]), 0o600); err != nil {
		t.Fatal(err)
	}
	data, _ := json.Marshal(map[string]map[string]string{"Replace": {src: block}})
	if err := os.WriteFile(overlay, data, 0o600); err != nil {
		t.Fatal(err)
	}
	prog := filepath.Join(work, name)
	if out, err := exec.Command("go", "build", "-overlay", overlay, "-o", prog, "../examples/"+name).CombinedOutput(); err != nil {
		t.Fatalf("the README's Go program does not compile: %v\n%s", err, out)
	}
	if out, err := exec.Command("go", "vet", "-overlay", overlay, "../examples/"+name).CombinedOutput(); err != nil {
		t.Fatalf("go vet of the README's Go program: %v\n%s", err, out)
	}
	cmd := exec.Command(prog)
	cmd.Env = append(os.Environ(), "FENCER_ENDPOINTS="+strings.Join(endpoints, ","))
	out, err := cmd.CombinedOutput()
	if err != nil || !want.Match(out) {
		t.Fatalf("the README's Go program: %v\n%s", err, out)
	}
}

// section returns the text under heading, up to the next heading of the
// same level.
func section(doc, heading string) string {
	i := strings.Index(doc, "\n"+heading+"\n")
	if i < 0 {
		return ""
	}
	rest := doc[i+len(heading)+2:]
	if j := strings.Index(rest, "\n## "); j >= 0 {
		rest = rest[:j]
	}
	return rest
}

// fencedBlocks returns the bodies of the ```lang blocks in text.
func fencedBlocks(text, lang string) []string {
	re := regexp.MustCompile("(?ms)^```" + regexp.QuoteMeta(lang) + "\n(.*?)^```$")
	var blocks []string
	for _, m := range re.FindAllStringSubmatch(text, -1) {
		blocks = append(blocks, m[1])
	}
	return blocks
}

// requireTool skips without the tool, except in make test, which must run
// everything.
func requireTool(t *testing.T, name string) {
	t.Helper()
	if _, err := exec.LookPath(name); err != nil {
		if os.Getenv("FENCER_REQUIRE_PG") == "1" {
			t.Fatalf("%s is not installed; make test needs it (apt-get install %s)", name, name)
		}
		t.Skipf("%s is not installed", name)
	}
}
