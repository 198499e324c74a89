package client

import (
	"os/exec"
	"strings"
	"testing"
)

// A program that imports the client gets the API contract (api/wire), not
// the server: no Raft, no bolt, no fencer internals. The client's own
// internal packages count as the client.
func TestClientDependsOnTheContractOnly(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").Output()
	if err != nil {
		t.Skipf("go list unavailable: %v", err)
	}
	const fencer = "github.com/fencer-io/fencer/"
	for _, dep := range strings.Fields(string(out)) {
		if strings.HasPrefix(dep, fencer) && dep != fencer+"api/wire" && dep != fencer+"api/client" && !strings.HasPrefix(dep, fencer+"api/client/internal/") {
			t.Errorf("api/client depends on %s", dep)
		}
		for _, banned := range []string{"hashicorp/raft", "go.etcd.io/bbolt", "go-chi/chi"} {
			if strings.Contains(dep, banned) {
				t.Errorf("api/client depends on %s", dep)
			}
		}
	}
}
