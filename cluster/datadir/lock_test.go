package datadir

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// A second holder of a data dir's lock is refused at once.
func TestDataDirLock(t *testing.T) {
	dir := t.TempDir()
	l, err := TryLock(dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := TryLock(dir); !errors.Is(err, ErrInUse) {
		t.Fatalf("second lock: %v", err)
	}
	l.Release()
	l, err = TryLock(dir)
	if err != nil {
		t.Fatalf("after release: %v", err)
	}
	l.Release()
	if _, err := os.Stat(filepath.Join(dir, LockFile)); err != nil {
		t.Fatal(err)
	}
}
