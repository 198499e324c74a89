package harness

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestGroupKillAllEndsStoppedProcesses(t *testing.T) {
	sleep, err := exec.LookPath("sleep")
	if err != nil {
		t.Skip(err)
	}
	g := &Group{}
	t.Cleanup(g.KillAll)
	log := filepath.Join(t.TempDir(), "sleep.log")
	p, err := g.Start(Spec{Name: "sleeper", Path: sleep, Args: []string{"60"}, Log: log})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Pause(); err != nil {
		t.Fatal(err)
	}
	g.KillAll()
	if !p.WaitExit(10 * time.Second) {
		t.Fatal("a stopped process survived KillAll")
	}
	b, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), "exited: signal: killed") {
		t.Errorf("log does not record the kill:\n%s", b)
	}
}

func TestLinesAndStdin(t *testing.T) {
	cat, err := exec.LookPath("cat")
	if err != nil {
		t.Skip(err)
	}
	g := &Group{}
	t.Cleanup(g.KillAll)
	lines := make(chan string, 10)
	p, err := g.Start(Spec{
		Name: "cat", Path: cat, Log: filepath.Join(t.TempDir(), "cat.log"), Stdin: true,
		Lines: func(b []byte) { lines <- string(b) },
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.stdin.Write([]byte("one\ntwo\n")); err != nil {
		t.Fatal(err)
	}
	if err := p.CloseStdin(); err != nil {
		t.Fatal(err)
	}
	if !p.WaitExit(10 * time.Second) {
		t.Fatal("cat did not exit on EOF")
	}
	close(lines)
	var got []string
	for l := range lines {
		got = append(got, l)
	}
	if strings.Join(got, ",") != "one,two" {
		t.Errorf("lines = %q", got)
	}
	if p.ExitErr() != nil {
		t.Errorf("exit: %v", p.ExitErr())
	}
}

func TestFreePortBelowEphemeralRange(t *testing.T) {
	seen := map[int]bool{}
	for range 20 {
		p, err := FreePort()
		if err != nil {
			t.Fatal(err)
		}
		if seen[p] {
			t.Fatalf("port %d handed out twice", p)
		}
		seen[p] = true
		if lo := ephemeralLow(); lo-20000 >= 1000 && p >= lo {
			t.Errorf("port %d is in the ephemeral range (from %d)", p, lo)
		}
	}
}
