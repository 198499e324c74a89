package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/fencer-io/fencer/api/wire"
	tc "github.com/fencer-io/fencer/test/testcluster"
)

// watchFencer runs "fencer watch ARGS" in-process until the test stops it
// (as an interrupt would), and returns its output so far and its end.
func watchFencer(t *testing.T, args ...string) (out *tc.SyncBuffer, stop func() error) {
	t.Helper()
	out = &tc.SyncBuffer{}
	var errb tc.SyncBuffer
	root := newRootCmd(out, &errb)
	root.SetArgs(append([]string{"watch"}, args...))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- root.ExecuteContext(ctx) }()
	stopped := false
	stop = func() error {
		if !stopped {
			stopped = true
			cancel()
		}
		err := <-done
		done <- err
		if err != nil {
			return fmt.Errorf("%w (stderr %q)", err, errb.String())
		}
		return nil
	}
	t.Cleanup(func() { stop() })
	return out, stop
}

func waitLines(t *testing.T, out *tc.SyncBuffer, n int) []string {
	t.Helper()
	var lines []string
	tc.Poll(t, 20*time.Second, fmt.Sprintf("%d lines of watch output", n), func() bool {
		lines = strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
		return len(lines) >= n && lines[0] != ""
	})
	return lines
}

// "fencer watch -o json" prints one JSON event per line, as they happen, and
// the text form one line of fields; an interrupt ends it cleanly.
func TestWatchCommand(t *testing.T) {
	newTestCluster(t)
	jsonOut, stopJSON := watchFencer(t, "cw.", "--since", "0", "-o", "json")
	textOut, stopText := watchFencer(t, "cw.", "--since", "0")

	m := grantLine.FindStringSubmatch(mustFencer(t, "lock", "acquire", "cw.job", "--holder", "cli"))
	if m == nil {
		t.Fatal("acquire printed no grant")
	}
	token, lease := m[1], m[2]
	mustFencer(t, "lock", "acquire", "other", "--holder", "cli")
	mustFencer(t, "kv", "put", "cw.cfg", "hello", "--token", token)
	mustFencer(t, "lock", "release", "cw.job", "--token", token, "--lease", lease)

	lines := waitLines(t, jsonOut, 3)
	var got []string
	var prev uint64
	for _, l := range lines {
		var ev wire.Event
		if err := json.Unmarshal([]byte(l), &ev); err != nil {
			t.Fatalf("line %q is not one JSON event: %v", l, err)
		}
		if ev.Index <= prev {
			t.Fatalf("index %d after %d", ev.Index, prev)
		}
		prev = ev.Index
		got = append(got, fmt.Sprintf("%s:%s%s:%d", ev.Type, ev.Lock, ev.Key, ev.Token))
	}
	if want := fmt.Sprintf("acquired:cw.job:%s put:cw.cfg:%s released:cw.job:%s", token, token, token); strings.Join(got, " ") != want {
		t.Fatalf("watch -o json printed %q, want %s", lines, want)
	}
	text := waitLines(t, textOut, 3)
	if want := `acquired lock=cw.job holder="cli" token=` + token; !strings.HasSuffix(text[0], want) || !strings.HasPrefix(text[0], "index=") ||
		!strings.HasSuffix(text[1], "put key=cw.cfg token="+token+" value_size=5") {
		t.Fatalf("watch printed %q", text)
	}
	if err := stopJSON(); err != nil {
		t.Fatalf("interrupted watch -o json: %v", err)
	}
	if err := stopText(); err != nil {
		t.Fatalf("interrupted watch: %v", err)
	}

	// A malformed --since is a usage error.
	if code, _, stderr := runFencer(t, "watch", "--since", "-1", "-o", "json"); code == 0 || !strings.Contains(stderr, `"code":"usage"`) {
		t.Fatalf("--since -1: exit %d, %s", code, stderr)
	}
}
