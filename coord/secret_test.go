package coord

import (
	"testing"

	"github.com/fencer-io/fencer/api/wire"
)

// A grant's secret has the length the contract promises.
func TestLeaseSecretLength(t *testing.T) {
	if s := newSecret("job"); len(s) != wire.LeaseSecretLen {
		t.Fatalf("secret %q: %d characters, want %d", s, len(s), wire.LeaseSecretLen)
	}
}
