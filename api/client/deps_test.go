package client

import (
	"os/exec"
	"strings"
	"testing"
)

// A program that imports the client gets the API contract (api/wire), not
// the server: no Raft, no bolt, no fencer internals.
func TestClientDependsOnTheContractOnly(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").Output()
	if err != nil {
		t.Skipf("go list unavailable: %v", err)
	}
	for _, dep := range strings.Fields(string(out)) {
		for _, banned := range []string{"hashicorp/raft", "go.etcd.io/bbolt", "fencer/cluster", "fencer/fsm", "fencer/server", "go-chi/chi"} {
			if strings.Contains(dep, banned) {
				t.Errorf("api/client depends on %s", dep)
			}
		}
	}
}
