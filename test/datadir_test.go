package test

import (
	"errors"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/fencer-io/fencer/cluster"
	"github.com/fencer-io/fencer/cluster/logstore"
	tc "github.com/fencer-io/fencer/test/testcluster"
)

// A data dir created beforehand with mode 0755 is made 0700 at start (and
// the log says so), and everything fencer writes into it, Raft snapshots
// holding lease secrets among them, is private: dirs 0700, files 0600, even
// with a umask of 0 (issue 13 item 8).
func TestDataDirIsPrivate(t *testing.T) {
	defer syscall.Umask(syscall.Umask(0)) // the worst case: modes exactly as asked for
	eachLogStore(t, dataDirIsPrivate)
}

func dataDirIsPrivate(t *testing.T, kind logstore.Kind) {
	dir := filepath.Join(t.TempDir(), "n1")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	// What an older build left readable.
	if err := os.WriteFile(filepath.Join(dir, "node.json.tmp"), []byte("{}"), 0o644); err != nil {
		t.Fatal(err)
	}
	var logs tc.SyncBuffer
	c := tc.New(t, 1, tc.Options{LogStore: kind, Configure: func(cfg *cluster.Config) {
		cfg.DataDir = dir
		cfg.Logger = slog.New(slog.NewTextHandler(&logs, nil))
		// Snapshot after every few entries, soon.
		cfg.SnapshotThreshold, cfg.SnapshotInterval = 1, 50*time.Millisecond
	}})
	n := c.WaitLeader(10 * time.Second)
	mustAcquire(t, n, "secret-holder", "w")
	tc.Poll(t, 10*time.Second, "a snapshot", func() bool { return lastSnapshotIndex(t, n) > 0 })
	if !strings.Contains(logs.String(), "made the data dir private") || !strings.Contains(logs.String(), "was=0755") {
		t.Errorf("the log does not say the data dir's mode was changed:\n%s", logs.String())
	}
	// Checked stopped: a running node snapshots every 50 ms here, and
	// Raft's in-progress snapshot dir is made private only when it is done
	// (the 0700 data dir already keeps it from other users).
	c.Stop(n)
	checkPrivate(t, dir)

	// A restart checks again (here nothing is left to change), and a
	// snapshot installed by a restore goes through the same store.
	c.Restart(n)
	leader := c.WaitLeader(10 * time.Second)
	before := lastSnapshotIndex(t, leader)
	mustAcquire(t, leader, "after-restart", "w")
	tc.Poll(t, 10*time.Second, "a snapshot after restart", func() bool { return lastSnapshotIndex(t, leader) > before })
	c.Stop(leader)
	checkPrivate(t, dir)
}

// checkPrivate fails the test unless dir is 0700 and everything in it is
// 0700 (dirs) or 0600 (files), with at least one snapshot's state.bin.
func checkPrivate(t *testing.T, dir string) {
	t.Helper()
	states := 0
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if errors.Is(err, fs.ErrNotExist) {
			return nil // a snapshot reaped meanwhile
		}
		if err != nil {
			return err
		}
		if d.IsDir() && strings.HasSuffix(d.Name(), ".tmp") && filepath.Base(filepath.Dir(path)) == "snapshots" {
			// A snapshot being written: Raft's store makes its dir 0755
			// and narrows it before the first byte, so for a moment it is
			// 0755 and empty. What it becomes is checked once complete.
			return fs.SkipDir
		}
		info, err := d.Info()
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil {
			return err
		}
		want := fs.FileMode(0o600)
		if d.IsDir() {
			want = 0o700
		}
		if got := info.Mode().Perm(); got != want {
			t.Errorf("%s: mode %#o, want %#o", path, got, want)
		}
		if d.Name() == "state.bin" {
			states++
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if states == 0 {
		t.Fatal("no snapshot state.bin in the data dir")
	}
}
