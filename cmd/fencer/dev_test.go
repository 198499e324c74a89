package main

import (
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	tc "github.com/fencer-io/fencer/test/testcluster"
)

// The dev cluster as a user runs it: the built binary, stopped by signals.
func TestDevProcess(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and runs clusters")
	}
	bin := tc.BuildFencer(t, t.TempDir())

	// By default the state is kept (under $XDG_STATE_HOME), so a restarted
	// dev cluster goes on from the tokens it issued before.
	t.Run("KeepsState", func(t *testing.T) {
		env := []string{"XDG_STATE_HOME=" + t.TempDir()}
		ports := tc.FreeDevPorts(t, devNodes)
		var last uint64
		for run := range 2 {
			d := tc.StartDev(t, bin, ports, env)
			token := devAcquire(t, d.URL(0), "kept"+strconv.Itoa(run))
			if token <= last {
				t.Fatalf("run %d: token %d, not above %d from the run before", run+1, token, last)
			}
			last = token
			d.Stop(t, syscall.SIGTERM)
		}
		state := strings.TrimPrefix(env[0], "XDG_STATE_HOME=")
		if _, err := os.Stat(filepath.Join(state, "fencer", "dev", "dev.json")); err != nil {
			t.Fatalf("state not in $XDG_STATE_HOME/fencer/dev: %v", err)
		}
	})

	// A clean stop logs no error, even with a request in flight on a
	// follower (which holds its HTTP server open) and the leader last in
	// line: stopping the followers' Raft first would leave the leader
	// failing to reach them until its own turn.
	t.Run("CleanStopLogsNoError", func(t *testing.T) {
		d := tc.StartDev(t, bin, tc.DevPorts{}, nil, "--ephemeral")
		last := strconv.Itoa(devNodes)
		tc.Do(t, "POST", d.URL(0)+"/v1/cluster/leader/transfer", `{"id":"n`+last+`"}`)
		tc.Poll(t, 10*time.Second, "n"+last+" leads", func() bool {
			_, body, _ := tc.Do(t, "GET", d.URL(0)+"/v1/cluster", "")
			return strings.Contains(body, `"leader":"n`+last+`"`)
		})
		leader := d.URL(devNodes - 1)
		if code, body, _ := tc.Do(t, "POST", leader+"/v1/locks/busy/acquire", `{"holder":"a","ttl_ms":60000}`); code != http.StatusOK {
			t.Fatalf("acquire: %d %s", code, body)
		}
		go http.Post(d.URL(1)+"/v1/locks/busy/acquire", "application/json",
			strings.NewReader(`{"holder":"b","ttl_ms":60000,"wait_ms":30000}`))
		tc.Poll(t, 10*time.Second, "a waiter queued", func() bool {
			_, body, _ := tc.Do(t, "GET", leader+"/metrics", "")
			return strings.Contains(body, "\nfencer_waiters 1\n")
		})
		d.Stop(t, syscall.SIGTERM)
		if errs := regexp.MustCompile(`(?m)^.*(\[ERROR\]|level=ERROR).*$`).FindAllString(d.Stderr.String(), -1); len(errs) > 0 {
			t.Fatalf("a clean stop logged %d errors, the first: %s", len(errs), errs[0])
		}
		d.CheckTempRemoved(t)
	})

	// Ctrl-C while the nodes start stops them and removes the throwaway
	// dir: the handler is in place before anything starts.
	t.Run("InterruptDuringStartup", func(t *testing.T) {
		d := tc.LaunchDev(t, bin, tc.DevPorts{}, nil, "--ephemeral")
		tc.Poll(t, 10*time.Second, "startup under way", func() bool {
			return strings.Contains(d.Stdout.String(), "removed on exit")
		})
		d.Stop(t, syscall.SIGINT)
		if strings.Contains(d.Stdout.String(), "\nleader: ") {
			t.Log("the cluster was up before the signal arrived; the stop was not during startup this time")
		}
		d.CheckTempRemoved(t)
	})

	// A second dev cluster on the same ports (a second `make run`) is
	// refused with the ports it found taken and flags that start it beside
	// the first; pasting that advice starts a second cluster.
	t.Run("SecondOnSamePorts", func(t *testing.T) {
		env := []string{"XDG_STATE_HOME=" + t.TempDir()}
		ports := tc.FreeDevPorts(t, devNodes)
		first := tc.StartDev(t, bin, ports, env)
		defer first.Stop(t, syscall.SIGTERM)
		for _, args := range [][]string{nil, {"--ephemeral"}} {
			second := tc.LaunchDev(t, bin, ports, env, args...)
			tc.Poll(t, 20*time.Second, "the second cluster exits", func() bool {
				return second.Exited()
			})
			msg := second.Stderr.String()
			if !strings.Contains(msg, "ports "+strconv.Itoa(ports.HTTP)+", ") || !strings.Contains(msg, strconv.Itoa(ports.Raft+devNodes-1)) {
				t.Fatalf("dev %v on taken ports: the refusal does not name them:\n%s", args, msg)
			}
			m := regexp.MustCompile(`fencer dev (--http-port \d+ --raft-port \d+ --ephemeral)`).FindStringSubmatch(msg)
			if m == nil {
				t.Fatalf("dev %v on taken ports: no flags to move it:\n%s", args, msg)
			}
			if len(args) == 0 {
				advised := strings.Fields(m[1])
				var moved tc.DevPorts
				moved.HTTP, _ = strconv.Atoi(advised[1])
				moved.Raft, _ = strconv.Atoi(advised[3])
				beside := tc.StartDev(t, bin, moved, env, "--ephemeral")
				devAcquire(t, beside.URL(0), "beside")
				beside.Stop(t, syscall.SIGTERM)
			}
		}
	})

	// Started by a script with SIGINT ignored (a background job of a
	// non-interactive shell), it still stops on SIGINT.
	t.Run("SIGINTWhenIgnored", func(t *testing.T) {
		d := tc.StartDev(t, "sh", tc.DevPorts{}, nil, "-c", `trap "" INT; exec "$0" "$@"`, bin, "dev", "--ephemeral")
		d.Stop(t, syscall.SIGINT)
		d.CheckTempRemoved(t)
	})
}

const devNodes = 3

// devAcquire takes a lock for a moment and returns its token.
func devAcquire(t *testing.T, url, name string) uint64 {
	t.Helper()
	code, body, _ := tc.Do(t, "POST", url+"/v1/locks/"+name+"/acquire", `{"holder":"t","ttl_ms":1000}`)
	m := regexp.MustCompile(`"token":(\d+)`).FindStringSubmatch(body)
	if code != http.StatusOK || m == nil {
		t.Fatalf("acquire %s: %d %s", name, code, body)
	}
	token, _ := strconv.ParseUint(m[1], 10, 64)
	return token
}
