package snapshot

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/fencer-io/fencer/fsm/entry"
)

// The records follow the header in one order, kind by kind; a reordering
// changes every snapshot's bytes (the golden files hold no delay, permit or
// voided record, so this pins their place).
func TestRecordOrder(t *testing.T) {
	cfg := entry.GrantHistorySettings{Global: 4, PerLock: 2}
	img := &Image{
		Header: Header{Format: Format, LastToken: 9, Locks: 1, Keys: 1, Members: 1, Requests: 1, Delays: 2, Permits: 1, Voided: 1, Grants: 1,
			GrantHistory: &cfg, GrantRing: 1, RestoredAt: 8},
		Locks:    []entry.Lock{{Name: "l", Holder: "h", Token: 5, Lease: "s", TTLMillis: 1}},
		Keys:     []entry.FencedKey{{Key: "k", Token: 5}},
		Members:  []entry.Member{{ID: "n1"}},
		Requests: []entry.RequestRecord{{Key: "l\x00h\x00r", Token: 5}},
		Delays:   []entry.Delay{{Lock: "d", Since: 3, Millis: 10}, {Semaphore: "s", Since: 4, Millis: 10, Limit: 2}},
		Permits:  []entry.Permit{{Semaphore: "s", Holder: "h", Token: 6, Lease: "s", TTLMillis: 1, Limit: 2}},
		Voided:   []entry.VoidedGrant{{Lock: "v", Holder: "h", Token: 2}},
		Grants:   []entry.GrantRecord{{Token: 5, Lock: "l", Holder: "h", GrantedIndex: 5}},
	}
	var buf bytes.Buffer
	if _, err := img.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, line := range bytes.Split(bytes.TrimSpace(buf.Bytes()), []byte("\n"))[1:] {
		var rec map[string]json.RawMessage
		if err := json.Unmarshal(line, &rec); err != nil || len(rec) != 1 {
			t.Fatalf("record %s: %v", line, err)
		}
		for k := range rec {
			kinds = append(kinds, k)
		}
	}
	want := []string{"lock", "key", "member", "request", "delay", "delay", "permit", "voided", "grant"}
	if len(kinds) != len(want) {
		t.Fatalf("records %v, want %v", kinds, want)
	}
	for i := range want {
		if kinds[i] != want[i] {
			t.Fatalf("records %v, want %v", kinds, want)
		}
	}
	if back, err := ReadImage(&buf); err != nil || len(back.Delays) != 2 || len(back.Permits) != 1 {
		t.Fatalf("read back: %v", err)
	}
}
