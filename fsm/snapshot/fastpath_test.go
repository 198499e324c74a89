package snapshot

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"

	"github.com/fencer-io/fencer/fsm/entry"
)

// jsonLockLine is the line encoding/json writes for a grant.
func jsonLockLine(t testing.TB, l entry.Lock) []byte {
	var buf bytes.Buffer
	if err := json.NewEncoder(&buf).Encode(Record{Lock: &l}); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

var lockRecordCases = []entry.Lock{
	{Name: "a", Holder: "h", Token: 1, Lease: "s", TTLMillis: 1},
	{Name: "scale-0000001", Holder: "bench-holder", Token: 1<<63 + 5, Lease: "00112233445566778899aabbccddeeff", TTLMillis: 7_200_000,
		RequestID: "0123456789abcdef0123456789abcdef", GrantedAtMillis: 1_700_000_000_000},
	{Name: "p", Holder: "h", Token: 9, Lease: "s", TTLMillis: 5, RequestID: "r", Principal: "alice", LockDelayMillis: 300, Value: "10.0.0.1:80"},
	{Name: "p", Holder: "h", Token: 9, Lease: "s", TTLMillis: 5, Principal: "alice"},
	{Name: "quote\"d", Holder: "h", Token: 2, Lease: "s", TTLMillis: 1},
	{Name: "a<b>&c", Holder: "h", Token: 2, Lease: "s", TTLMillis: 1},
	{Name: "é", Holder: "h", Token: 2, Lease: "s", TTLMillis: 1},
	{Name: "n", Holder: "tab\there", Token: 2, Lease: "s", TTLMillis: 1},
	{Name: "a<b", Holder: "h", Token: 2, Lease: "s", TTLMillis: 1},
	{Name: "n", Holder: "x&y", Token: 2, Lease: "s", TTLMillis: 1},
	{Name: "n", Holder: "h", Token: 2, Lease: "s", TTLMillis: 1, Value: "\u2028"},
	{Name: "n", Holder: "h", Token: 2, Lease: "s", TTLMillis: -3, GrantedAtMillis: -1, LockDelayMillis: -2},
	{Name: "", Holder: "", Token: 0, Lease: "", TTLMillis: 0},
}

// The fast writer's bytes are encoding/json's, or it declines.
func TestAppendLockRecordWritesWhatJSONWrites(t *testing.T) {
	fast := 0
	for _, l := range lockRecordCases {
		got, ok := appendLockRecord([]byte("x"), &l)
		if !ok {
			if string(got) != "x" {
				t.Errorf("%+v: declined but wrote %q", l, got)
			}
			continue
		}
		fast++
		if want := append([]byte("x"), jsonLockLine(t, l)...); !bytes.Equal(got, want) {
			t.Errorf("%+v:\n got %s\nwant %s", l, got, want)
		}
	}
	if fast < 4 {
		t.Errorf("only %d of the plain cases took the fast path", fast)
	}
}

// The fast reader decodes what encoding/json decodes, or declines.
func TestParseLockRecordReadsWhatJSONReads(t *testing.T) {
	var lines [][]byte
	for _, l := range lockRecordCases {
		lines = append(lines, bytes.TrimSpace(jsonLockLine(t, l)))
	}
	for _, s := range []string{
		`{"lock":{"name":"a","holder":"h","token":1,"lease":"s","ttl_ms":1,"request_id":"","granted_at_ms":0}}`,
		`{"lock":{"name":"a","holder":"h","token":01,"lease":"s","ttl_ms":1}}`,
		`{"lock":{"name":"a","holder":"h","token":18446744073709551616,"lease":"s","ttl_ms":1}}`,
		`{"lock":{"name":"a","holder":"h","token":1.5,"lease":"s","ttl_ms":1}}`,
		`{"lock":{"name":"a","holder":"h","token":1,"lease":"s","ttl_ms":-0}}`,
		`{"lock":{"name":"a","holder":"h","token":1,"lease":"s","ttl_ms":1,"value":null}}`,
		`{"lock":{"name":"a\u0062","holder":"h","token":1,"lease":"s","ttl_ms":1}}`,
		`{"lock":{"holder":"h","name":"a","token":1,"lease":"s","ttl_ms":1}}`,
		`{"lock":{"name":"a","name":"b","holder":"h","token":1,"lease":"s","ttl_ms":1}}`,
		`{"lock":{"name":"a","holder":"h","token":1,"lease":"s","ttl_ms":1} }`,
		`{"lock":{"name":"a","holder":"h","token":1,"lease":"s","ttl_ms":1}}{}`,
		`{"lock":{"name":"a","holder":"h","token":1,"lease":"s","ttl_ms":1},"key":null}`,
		`{"lock":{"NAME":"a","holder":"h","token":1,"lease":"s","ttl_ms":1}}`,
		`{"lock":{"name":"a","holder":"h","token":1,"lease":"s","ttl_ms":1,"extra":1}}`,
		"{\"lock\":{\"name\":\"\xff\",\"holder\":\"h\",\"token\":1,\"lease\":\"s\",\"ttl_ms\":1}}",
	} {
		lines = append(lines, []byte(s))
	}
	fast := 0
	for _, line := range lines {
		var r LockRecord
		if !parseLockRecord(line, &r) {
			continue
		}
		fast++
		var rec Record
		if err := decodeLine(line, &rec); err != nil || rec.Lock == nil {
			t.Errorf("%s: fast path accepted what encoding/json refuses (%v)", line, err)
			continue
		}
		if got := r.Lock(); !reflect.DeepEqual(got, *rec.Lock) {
			t.Errorf("%s:\n got %+v\nwant %+v", line, got, *rec.Lock)
		}
	}
	if fast < 5 {
		t.Errorf("only %d lines took the fast path", fast)
	}
}

// FuzzLockRecord: whatever the fast reader accepts, encoding/json reads to
// the same grant, and the fast writer writes it back as encoding/json would.
func FuzzLockRecord(f *testing.F) {
	for _, l := range lockRecordCases {
		f.Add(bytes.TrimSpace(jsonLockLine(f, l)))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		var r LockRecord
		if !parseLockRecord(line, &r) {
			return
		}
		var rec Record
		if err := decodeLine(line, &rec); err != nil || rec.Lock == nil {
			t.Fatalf("fast path accepted what encoding/json refuses (%v)", err)
		}
		got := r.Lock()
		if !reflect.DeepEqual(got, *rec.Lock) {
			t.Fatalf("got %+v, want %+v", got, *rec.Lock)
		}
		if out, ok := appendLockRecord(nil, &got); ok && !bytes.Equal(out, jsonLockLine(t, *rec.Lock)) {
			t.Fatalf("written back as %s, encoding/json writes %s", out, jsonLockLine(t, *rec.Lock))
		}
	})
}

func jsonRequestLine(t testing.TB, r entry.RequestRecord) []byte {
	var buf bytes.Buffer
	if err := json.NewEncoder(&buf).Encode(Record{Request: &r}); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// Request records, whose keys hold NULs, go both ways as encoding/json's.
func TestRequestRecordsAsJSON(t *testing.T) {
	fast := 0
	for _, r := range []entry.RequestRecord{
		{Key: reqKey("lock", "holder", "0123456789abcdef", ""), Token: 7},
		{Key: reqKey("lock", "holder", "id", "alice"), Token: 1<<40 + 1},
		{Key: "a<b", Token: 1},
		{Key: "quote\"", Token: 1},
		{Key: "é\x00", Token: 1},
		{Key: "", Token: 0},
	} {
		want := jsonRequestLine(t, r)
		if got, ok := appendRequestRecord(nil, &r); ok {
			fast++
			if !bytes.Equal(got, want) {
				t.Errorf("%q: wrote %s, want %s", r.Key, got, want)
			}
		}
		if got, ok := parseRequestRecord(bytes.TrimSpace(want)); ok && got != r {
			t.Errorf("%s: read %+v", want, got)
		}
	}
	for _, s := range []string{`{"request":{"key":"a\u0001","token":1}}`, `{"request":{"key":"a","token":1,"x":2}}`, `{"request":{"key":"a\u0000","token":01}}`} {
		if r, ok := parseRequestRecord([]byte(s)); ok {
			t.Errorf("%s: read as %+v, want encoding/json's reading", s, r)
		}
	}
	if fast < 3 {
		t.Errorf("only %d records took the fast path", fast)
	}
}

// FuzzRequestRecord: whatever the fast reader accepts, encoding/json reads
// alike.
func FuzzRequestRecord(f *testing.F) {
	f.Add(bytes.TrimSpace(jsonRequestLine(f, entry.RequestRecord{Key: reqKey("l", "h", "id", "p"), Token: 3})))
	f.Fuzz(func(t *testing.T, line []byte) {
		r, ok := parseRequestRecord(line)
		if !ok {
			return
		}
		var rec Record
		if err := decodeLine(line, &rec); err != nil || rec.Request == nil || *rec.Request != r {
			t.Fatalf("fast path read %+v, encoding/json %+v (%v)", r, rec.Request, err)
		}
	})
}

// reqKey is a request key as the state builds it: NULs between its parts.
func reqKey(lock, holder, id, principal string) string {
	k := lock + "\x00" + holder + "\x00" + id
	if principal != "" {
		k += "\x00" + principal
	}
	return k
}
