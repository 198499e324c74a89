package datadir

import (
	"strings"
	"testing"
)

// A data dir gets an identity on first use, keeps it, and refuses another
// node's id.
func TestIdentity(t *testing.T) {
	dir := t.TempDir()
	first, err := LoadIdentity(dir, "n1")
	if err != nil || first.NodeID != "n1" || len(first.Incarnation) != 16 {
		t.Fatalf("new dir: %+v %v", first, err)
	}
	first.ClusterID = "c1"
	if err := first.Save(dir); err != nil {
		t.Fatal(err)
	}
	again, err := LoadIdentity(dir, "n1")
	if err != nil || again != first {
		t.Fatalf("reloaded %+v %v, want %+v", again, err, first)
	}
	if _, err := LoadIdentity(dir, "n2"); err == nil || !strings.Contains(err.Error(), `belongs to node "n1"`) {
		t.Fatalf("another node's dir: %v", err)
	}
}
