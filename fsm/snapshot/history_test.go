package snapshot

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"

	"github.com/fencer-io/fencer/fsm/entry"
)

// The fast path writes a grant line byte for byte as encoding/json does,
// and declines what encoding/json would escape.
func TestGrantRecordLikeEncodingJSON(t *testing.T) {
	for _, g := range []entry.GrantRecord{
		{Token: 1, Lock: "a", Holder: "h", GrantedIndex: 1},
		{Token: 1<<40 | 77, Lock: "jobs/nightly.report", Holder: "worker-1 pid 9", GrantedIndex: 77, Ended: entry.EndHandedOff, EndedIndex: 90},
		{Token: 5, Lock: "a", Holder: `say "hi"`, GrantedIndex: 5, Ended: entry.EndVoided, EndedIndex: 6},
		{Token: 6, Lock: "a", Holder: "é<>&", GrantedIndex: 6},
		{Token: 7, Lock: "a>", Holder: "<", GrantedIndex: 7},
		// A semaphore permit's grant: the semaphore in the lock's place.
		{Token: 8, Semaphore: "jobs", Holder: "worker-2", GrantedIndex: 8, Ended: entry.EndExpired, EndedIndex: 9},
		{Token: 9, Semaphore: "s>", Holder: "<", GrantedIndex: 9},
		// A multi-grant's, with its names: encoding/json writes it.
		{Token: 10, Lock: "a", Holder: "m", GrantedIndex: 10, Names: []string{"a", "b"}},
	} {
		var want bytes.Buffer
		json.NewEncoder(&want).Encode(Record{Grant: &g})
		got, ok := appendGrantRecord([]byte("x"), &g)
		plain := !bytes.ContainsAny([]byte(g.Holder), "\"é<>&") && g.Names == nil
		if ok != plain {
			t.Errorf("%+v: fast path %v", g, ok)
		}
		if ok && !bytes.Equal(got[1:], want.Bytes()) {
			t.Errorf("%+v:\n got %s\nwant %s", g, got[1:], want.Bytes())
		}
		if !ok && string(got) != "x" {
			t.Errorf("%+v: declined, yet wrote %q", g, got)
		}
		if ok {
			var back entry.GrantRecord
			if !parseGrantRecord(bytes.TrimSuffix(got[1:], []byte("\n")), &back) || !reflect.DeepEqual(back, g) {
				t.Errorf("%+v: parsed back as %+v", g, back)
			}
		}
		var buf bytes.Buffer
		sw := NewWriter(&buf)
		sw.Grant(&g)
		sw.Close()
		if !bytes.Equal(buf.Bytes(), want.Bytes()) {
			t.Errorf("%+v: Writer.Grant wrote %s, want %s", g, buf.Bytes(), want.Bytes())
		}
	}
}
