package request

import (
	"testing"

	"github.com/fencer-io/fencer/api/wire"
)

// FuzzStrictFlatJSON: whatever body the fast path decides, it decides as
// the walk through encoding/json's tokenizer does, error for error.
func FuzzStrictFlatJSON(f *testing.F) {
	for _, s := range []string{
		`{"holder":"w","ttl_ms":1000,"wait_ms":0,"request_id":"0123456789abcdef"}`, `{"holder":"a","holder":"b"}`,
		`{"Holder":"w"}`, `{"holder":"w\ud800"}`, "{\"holder\":\"\xff\"}", `{"holder":"é","x":-1.5e+3}`, `{}`, ` { } `,
		`{"token":12,"lease":"s"}`, `{"a":tru,"a":1}`, `{"a":01}`, `{"a":1.}`, `{"a":null,"b":false,"c":true}`, `{"a":1} x`,
		`{"holder":"w","x":{"a":1}}`, `{"hold\u0065r":"w"}`, `[1]`, `{"a":"b",}`, `{"a" : "b" , "b":"a"}`,
	} {
		f.Add([]byte(s))
	}
	fields := jsonFields(&wire.AcquireRequest{})
	f.Fuzz(func(t *testing.T, body []byte) {
		done, err := strictFlatJSON(body, fields)
		if !done {
			return
		}
		want := strictJSONWalk(body, fields)
		if (err == nil) != (want == nil) || (err != nil && err.Error() != want.Error()) {
			t.Fatalf("%q: fast path says %v, the walk %v", body, err, want)
		}
	})
}

func TestStrictFlatJSONTakesClientBodies(t *testing.T) {
	fields := jsonFields(&wire.AcquireRequest{})
	for _, s := range []string{`{"holder":"w","ttl_ms":1000,"wait_ms":0,"request_id":"0123456789abcdef"}`, `{"holder":"a","holder":"b"}`, `{"Holder":"w"}`} {
		if done, _ := strictFlatJSON([]byte(s), fields); !done {
			t.Errorf("%s: left to the walk", s)
		}
	}
	body := []byte(`{"holder":"w","ttl_ms":1000,"request_id":"0123456789abcdef"}`)
	if n := testing.AllocsPerRun(100, func() { strictFlatJSON(body, fields) }); n > 0 {
		t.Errorf("%v allocations per body, want none", n)
	}
}
