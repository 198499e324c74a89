package fsm

import (
	"bytes"
	"testing"

	"github.com/fencer-io/fencer/fsm/entry"
	"github.com/fencer-io/fencer/fsm/snapshot"
)

// A member's key is kept, survives a snapshot, and makes the snapshot
// version 4 (which builds from before keys refuse whole, rather than drop
// the keys); without keys the snapshot is written as before. A header that
// miscounts the keys, or a version 3 with keys, is refused.
func TestMemberKeySnapshot(t *testing.T) {
	write := func(f *FSM) []byte {
		var buf bytes.Buffer
		f.Image().WriteTo(&buf)
		return buf.Bytes()
	}
	f := New(nil)
	f.ApplyCommand(&entry.SetMember{Member: entry.Member{ID: "n1", RaftAddr: "r1", HTTPAddr: "h1"}}, 1)
	if v := write(f); !bytes.Contains(v, []byte(`"version":1,`)) {
		t.Fatalf("no member key, not version 1: %s", v)
	}
	f.ApplyCommand(&entry.SetMember{Member: entry.Member{ID: "n2", RaftAddr: "r2", HTTPAddr: "h2", Key: "k2"}}, 2)
	if m, _ := f.Member("n2"); m.Key != "k2" {
		t.Fatalf("member record %+v: the key was not kept", m)
	}
	v4 := write(f)
	if !bytes.Contains(v4, []byte(`"version":4,`)) || !bytes.Contains(v4, []byte(`"member_keys":1`)) {
		t.Fatalf("a member key, not version 4: %s", v4)
	}
	roundTrip(t, f)
	for name, bad := range map[string][]byte{
		"v3 with keys":  bytes.Replace(v4, []byte(`"version":4,`), []byte(`"version":3,`), 1),
		"keys miscount": bytes.Replace(v4, []byte(`"member_keys":1`), []byte(`"member_keys":2`), 1),
	} {
		if _, err := snapshot.ReadImage(bytes.NewReader(bad)); err == nil {
			t.Errorf("%s: accepted:\n%s", name, bad)
		}
	}
}

// A set-member with a key needs LogFormatMemberKey: an older build would
// drop the key.
func TestMemberKeyNeedsFormat(t *testing.T) {
	cmd := &entry.SetMember{Member: entry.Member{ID: "n1", RaftAddr: "r", HTTPAddr: "h", Key: "k"}}
	if _, err := entry.EncodeFormat(cmd, entry.LogFormatPermitHistory); err == nil {
		t.Fatal("a member key encoded for a format that would drop it")
	}
	if _, err := entry.EncodeFormat(cmd, entry.LogFormatMemberKey); err != nil {
		t.Fatal(err)
	}
	cmd.Key = ""
	if _, err := entry.EncodeFormat(cmd, entry.LogFormatJSON); err != nil {
		t.Fatalf("a member without a key needs no newer format: %v", err)
	}
}
