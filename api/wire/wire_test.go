package wire_test

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/fencer-io/fencer/api/wire"
	"github.com/fencer-io/fencer/fsm/snapshot"
)

// wire.SnapshotHeader mirrors snapshot.Header so that the client need not import
// the server's state machine; this keeps the two from drifting apart.
func TestSnapshotHeaderMirrorsFSMHeader(t *testing.T) {
	h := snapshot.Header{Format: "f", Version: 1, ClusterID: "c", Epoch: 2, EpochFloor: 2, LastToken: 3, AppliedIndex: 4, Term: 5, Locks: 6, Keys: 7, Members: 8, Requests: 9}
	data, _ := json.Marshal(h)
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var w wire.SnapshotHeader
	if err := dec.Decode(&w); err != nil {
		t.Fatalf("snapshot.Header has a field wire.SnapshotHeader lacks: %v", err)
	}
	back, _ := json.Marshal(w)
	if !bytes.Equal(back, data) {
		t.Fatalf("headers differ:\n%s\n%s", data, back)
	}
}

// The bodies that were maps before they had types: the same bytes.
func TestTypedBodiesKeepTheirBytes(t *testing.T) {
	for _, c := range []struct {
		typed any
		was   map[string]string
	}{
		{wire.Health{Node: "n1", Status: "ready"}, map[string]string{"status": "ready", "node": "n1"}},
		{wire.RemoveMemberResponse{Removed: "n2"}, map[string]string{"removed": "n2"}},
		{wire.TransferResponse{To: "n3", Transferred: "ok"}, map[string]string{"transferred": "ok", "to": "n3"}},
		{wire.TransferResponse{Transferred: "ok"}, map[string]string{"transferred": "ok", "to": ""}},
	} {
		got, _ := json.Marshal(c.typed)
		want, _ := json.Marshal(c.was)
		if !bytes.Equal(got, want) {
			t.Errorf("%T: %s, was %s", c.typed, got, want)
		}
	}
}
