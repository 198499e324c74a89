package fsm

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/fencer-io/fencer/fsm/entry"
)

// Every command entry can decode has its apply function: Decode returning a
// command that applyCommand cannot carry out would stop every replica.
func TestEveryCommandHasAnApplier(t *testing.T) {
	for _, typ := range entry.Types() {
		if appliers[typ] == nil {
			t.Errorf("command %s has no apply function", typ)
		}
	}
	if len(appliers) != len(entry.Types()) {
		t.Errorf("%d apply functions for %d commands", len(appliers), len(entry.Types()))
	}
}

// TestLegacyJSONReplaysAlike: replaying a cycle from the JSON entries older
// builds wrote and from today's binary ones ends in the same state.
func TestLegacyJSONReplaysAlike(t *testing.T) {
	replay := func(entries [][]byte) string {
		f := New(nil)
		for i, e := range entries {
			applyEntry(f, uint64(i+1), e)
		}
		return f.Digest()
	}
	lease := strings.Repeat("c", 32)
	cycle := []entry.Command{
		&entry.Acquire{Lock: "a", Holder: "w", Lease: lease, TTLMillis: 1000, RequestID: "r"},
		&entry.Put{Key: "k", Value: []byte("v"), Token: 1, Lock: "a"},
		&entry.Release{Lock: "a", Token: 1, Lease: lease, Next: &entry.Acquire{Holder: "w2", Lease: lease, TTLMillis: 1000}},
		&entry.Expire{Lock: "a", Token: 3},
	}
	var asJSON, asBinary [][]byte
	for _, c := range cycle {
		payload, _ := json.Marshal(c)
		asJSON = append(asJSON, append([]byte{byte(c.Type())}, payload...))
		b, err := entry.Encode(c)
		if err != nil {
			t.Fatal(err)
		}
		asBinary = append(asBinary, b)
	}
	if a, b := replay(asJSON), replay(asBinary); a != b {
		t.Fatalf("JSON replay digest %s, binary %s", a, b)
	}
}
