package test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	tc "github.com/fencer-io/fencer/test/testcluster"
)

// The most shell blocks of docs/*.md that may be marked `<!-- norun: why -->`
// (an operator's machines, systemd, PostgreSQL, minutes-long runs, streams
// that follow until interrupted), and the fewest that must run. Raising the
// first or lowering the second is a change a reviewer sees: a block is not
// left out of this test without a word.
const (
	maxDocsNoRun = 13
	minDocsRun   = 14
)

// norunMark is the line right before a ```sh block that this test must not
// run, with the reason.
var norunMark = regexp.MustCompile(`^<!-- norun: (\S.*\S) -->$`)

// docsBlock is one ```sh block of a doc.
type docsBlock struct {
	line  int    // of the opening fence
	body  string // between the fences
	norun string // the reason given, for a block not to run
}

// Every shell block of docs/*.md runs as pasted, as the README's quick start
// does: a doc's blocks, in order, in one bash session (set -euo pipefail)
// against a fencer dev cluster of the built binary, its addresses moved to
// free ports, with `fencer` on PATH and the placeholder programs the docs
// name (./print-queue.sh, ./crawl.sh, ./scheduler) present. A block passes
// when it exits 0 and the error codes of its output are those its comments
// show: a curl refused 415 unsupported_media_type, or any refusal the doc
// does not announce, fails it.
func TestDocsShellBlocks(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and runs clusters")
	}
	for _, tool := range []string{"bash", "curl", "jq"} {
		requireTool(t, tool)
	}
	docs, err := filepath.Glob("../docs/*.md")
	if err != nil || len(docs) == 0 {
		t.Fatalf("no docs found: %v", err)
	}
	blocks := map[string][]docsBlock{}
	ran, skipped := 0, 0
	for _, doc := range docs {
		text, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		bs, err := shellBlocks(string(text))
		if err != nil {
			t.Errorf("%s: %v", doc, err)
			continue
		}
		blocks[doc] = bs
		for _, b := range bs {
			if b.norun != "" {
				skipped++
				t.Logf("%s:%d not run: %s", filepath.Base(doc), b.line, b.norun)
			} else {
				ran++
			}
		}
	}
	t.Logf("docs shell blocks: %d to run, %d marked norun", ran, skipped)
	if skipped > maxDocsNoRun || ran < minDocsRun {
		t.Fatalf("%d blocks marked norun (at most %d) and %d to run (at least %d): run the new blocks, or justify the change in maxDocsNoRun/minDocsRun",
			skipped, maxDocsNoRun, ran, minDocsRun)
	}

	work := t.TempDir()
	bin := tc.BuildFencer(t, work)
	stubs := filepath.Join(work, "run")
	writeDocsStubs(t, stubs)
	names := make([]string, 0, len(blocks))
	for doc := range blocks {
		names = append(names, doc)
	}
	sort.Strings(names)
	for _, doc := range names {
		var run []docsBlock
		for _, b := range blocks[doc] {
			if b.norun == "" {
				run = append(run, b)
			}
		}
		if len(run) == 0 {
			continue
		}
		t.Run(strings.TrimSuffix(filepath.Base(doc), ".md"), func(t *testing.T) {
			runDocBlocks(t, bin, stubs, run)
		})
	}
}

// shellBlocks returns the ```sh blocks of a markdown text, each with the
// reason of the norun mark right before it, if any. Shell under another
// fence name (bash, shell, console) is refused: it would not be run.
func shellBlocks(text string) ([]docsBlock, error) {
	lines := strings.Split(text, "\n")
	var out []docsBlock
	for i := 0; i < len(lines); i++ {
		fence := lines[i]
		if !strings.HasPrefix(fence, "```") {
			continue
		}
		lang := strings.TrimSpace(strings.TrimPrefix(fence, "```"))
		end := i + 1
		for end < len(lines) && lines[end] != "```" {
			end++
		}
		if end == len(lines) {
			return nil, fmt.Errorf("line %d: the block is not closed", i+1)
		}
		switch lang {
		case "sh":
			b := docsBlock{line: i + 1, body: strings.Join(lines[i+1:end], "\n") + "\n"}
			if i > 0 && strings.HasPrefix(lines[i-1], "<!-- norun") {
				m := norunMark.FindStringSubmatch(lines[i-1])
				if m == nil {
					return nil, fmt.Errorf("line %d: %q: want <!-- norun: REASON --> with the reason the block cannot run here", i, lines[i-1])
				}
				b.norun = m[1]
			}
			out = append(out, b)
		case "bash", "shell", "console", "shell-session", "zsh":
			return nil, fmt.Errorf("line %d: a ```%s block; shell blocks are ```sh, so that this test runs them", i+1, lang)
		}
		if i > 0 && strings.HasPrefix(lines[i-1], "<!-- norun") && lang != "sh" {
			return nil, fmt.Errorf("line %d: a norun mark before a ```%s block, which is never run", i, lang)
		}
		i = end
	}
	return out, nil
}

// runDocBlocks runs one doc's blocks in one bash session against a new dev
// cluster and checks their outcome.
func runDocBlocks(t *testing.T, bin, stubs string, blocks []docsBlock) {
	dev := tc.StartDev(t, bin, tc.FreeDevPorts(t, 3), nil, "--ephemeral")
	t.Cleanup(func() { dev.Stop(t, syscall.SIGTERM) })
	httpPort := dev.Ports().HTTP
	var endpoints []string
	for i := range 3 {
		endpoints = append(endpoints, "127.0.0.1:"+strconv.Itoa(httpPort+i))
	}
	var script strings.Builder
	script.WriteString("set -euo pipefail\n")
	var shown []string // the codes the blocks' comments show
	for _, b := range blocks {
		moved := regexp.MustCompile(`(localhost|127\.0\.0\.1):700([1-3])\b`).ReplaceAllStringFunc(b.body, func(m string) string {
			host, port, _ := strings.Cut(m, ":")
			n, _ := strconv.Atoi(port[len(port)-1:])
			return host + ":" + strconv.Itoa(httpPort+n-1)
		})
		if regexp.MustCompile(`(localhost|127\.0\.0\.1):(700[0-9]|800[0-9])\b`).MatchString(moved) {
			t.Fatalf("block at line %d names a dev cluster port this test does not move:\n%s", b.line, b.body)
		}
		for _, m := range regexp.MustCompile(`#.*?"code":"([a-z_]+)"`).FindAllStringSubmatch(b.body, -1) {
			shown = append(shown, m[1])
		}
		script.WriteString("echo '--- block at line " + strconv.Itoa(b.line) + "'\n" + moved)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	sh := exec.CommandContext(ctx, "bash", "-c", script.String())
	sh.Dir = stubs
	sh.Env = append(os.Environ(),
		"PATH="+filepath.Dir(bin)+string(os.PathListSeparator)+os.Getenv("PATH"),
		"FENCER_ENDPOINTS="+strings.Join(endpoints, ","))
	start := time.Now()
	outBytes, err := sh.CombinedOutput()
	out := string(outBytes)
	if err != nil {
		t.Fatalf("the blocks failed after %v: %v\n--- output (the last block is the failing one)\n%s\n--- dev cluster log\n%s",
			time.Since(start).Round(time.Millisecond), err, out, dev.Stderr.String())
	}
	t.Logf("ran in %v:\n%s", time.Since(start).Round(time.Millisecond), out)
	got := map[string]bool{}
	for _, m := range regexp.MustCompile(`"code":"([a-z_]+)"`).FindAllStringSubmatch(out, -1) {
		got[m[1]] = true
	}
	for _, code := range shown {
		if !got[code] {
			t.Errorf("a comment shows code %q; the blocks did not produce it", code)
		}
		delete(got, code)
	}
	for code := range got {
		t.Errorf("the blocks were refused with code %q, which no comment announces:\n%s", code, out)
	}
}

// writeDocsStubs puts in dir the programs the docs run under a lock, as
// stand-ins for the reader's own: each prints the token it got.
func writeDocsStubs(t *testing.T, dir string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"print-queue.sh", "crawl.sh", "scheduler"} {
		script := "#!/bin/sh\necho \"" + name + " running with token $FENCER_TOKEN\"\n"
		if err := os.WriteFile(filepath.Join(dir, name), []byte(script), 0o755); err != nil {
			t.Fatal(err)
		}
	}
}
