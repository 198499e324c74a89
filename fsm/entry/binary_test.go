package entry

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
)

// cycleCommands are the commands written in binary, with every field set.
func cycleCommands() []Command {
	next := &Acquire{Lock: "a", Holder: "w2", Lease: strings.Repeat("b", 32), TTLMillis: 9000, RequestID: "r2", NowMillis: 1_790_000_000_123}
	return []Command{
		&Acquire{Lock: "jobs.nightly", Holder: "worker-1", Lease: strings.Repeat("c", 32), TTLMillis: 10_000, RequestID: "req-1", NowMillis: 1_790_000_000_000},
		&Acquire{Lock: "a", Holder: "w", Lease: "l", TTLMillis: -1}, // refused by apply, but it must survive the trip
		&Release{Lock: "a", Token: 1<<40 | 77, Lease: strings.Repeat("a", 32)},
		&Release{Lock: "a", Token: 7, Lease: "l", Next: next},
		&Expire{Lock: "a", Token: 1<<63 + 5},
		&Expire{Lock: "a", Token: 7, Next: next},
		&Put{Key: "k", Value: []byte{0, 1, 2, 255}, Token: 99, Lock: "a"},
		&Put{Key: "k", Value: []byte{}, Token: 1},
	}
}

// legacyEntries are the same commands as the JSON entries written before the
// binary types existed: logs and backups still hold them.
func legacyEntries(tb testing.TB) [][]byte {
	var out [][]byte
	for _, c := range cycleCommands() {
		payload, err := json.Marshal(c)
		if err != nil {
			tb.Fatal(err)
		}
		out = append(out, append([]byte{byte(c.Type())}, payload...))
	}
	return out
}

// principalCommands are lock-cycle commands with principals, which only the
// forms of LogFormatPrincipal carry.
func principalCommands() []Command {
	next := &Acquire{Lock: "a", Holder: "w2", Lease: strings.Repeat("b", 32), TTLMillis: 9000, RequestID: "r2", NowMillis: 1_790_000_000_123, Principal: "ops"}
	return []Command{
		&Acquire{Lock: "jobs.nightly", Holder: "worker-1", Lease: strings.Repeat("c", 32), TTLMillis: 10_000, RequestID: "req-1", NowMillis: 1_790_000_000_000, Principal: "ci"},
		&Release{Lock: "a", Token: 7, Lease: "l", Next: next},
		&Expire{Lock: "a", Token: 7, Next: next},
		&Put{Key: "k", Value: []byte{0, 1, 2, 255}, Token: 99, Lock: "a", Principal: "ci"},
	}
}

// decodedAs is c as its entry in format decodes: without principals below
// LogFormatPrincipal, and, from it on, a put that applies the
// unissued-token rule.
func decodedAs(c Command, format int) Command {
	acquire := func(a *Acquire) *Acquire {
		if a == nil {
			return nil
		}
		b := *a
		if format < LogFormatPrincipal {
			b.Principal = ""
		}
		return &b
	}
	switch c := c.(type) {
	case *Acquire:
		return acquire(c)
	case *Release:
		r := *c
		r.Next = acquire(c.Next)
		return &r
	case *Expire:
		e := *c
		e.Next = acquire(c.Next)
		return &e
	case *Put:
		p := *c
		if format < LogFormatPrincipal {
			p.Principal = ""
		}
		p.issuedOnly = format >= LogFormatPrincipal
		return &p
	}
	return c
}

func TestBinaryRoundTrip(t *testing.T) {
	for format := LogFormatBinary; format <= LogFormat; format++ {
		for _, c := range append(cycleCommands(), principalCommands()...) {
			entry, err := EncodeFormat(c, format)
			if err != nil {
				t.Fatal(err)
			}
			if got := CommandType(entry[0]); got.Logical() != c.Type() || got == c.Type() || kinds[got].form != kinds[c.Type()].spec.form(format, fieldsFormat(c)) {
				t.Fatalf("%s encoded for format %d with type byte %d, want the newest binary form that format reads", c.Type(), format, entry[0])
			}
			back, err := Decode(entry)
			if err != nil {
				t.Fatalf("%s: %v", c.Type(), err)
			}
			if want := decodedAs(c, format); !reflect.DeepEqual(back, want) {
				t.Fatalf("round trip in format %d:\n got %+v\nwant %+v", format, back, want)
			}
		}
	}
}

// TestLegacyJSONStillDecodes: an entry written by an older fencer decodes to
// the same command as today's binary entry (fsm's TestLegacyJSONReplaysAlike
// applies both).
func TestLegacyJSONStillDecodes(t *testing.T) {
	cmds := cycleCommands()
	for i, entry := range legacyEntries(t) {
		old, err := Decode(entry)
		if err != nil {
			t.Fatalf("legacy %s: %v", cmds[i].Type(), err)
		}
		if !reflect.DeepEqual(old, cmds[i]) {
			t.Fatalf("legacy entry decoded as %+v, want %+v", old, cmds[i])
		}
	}

}

// TestLegacyJSONGolden decodes entries byte for byte as builds before the
// binary types wrote them (literal JSON, not re-marshalled from today's
// structs), so renaming a JSON field breaks this test and not old logs.
func TestLegacyJSONGolden(t *testing.T) {
	lease := strings.Repeat("c", 32)
	for _, c := range []struct {
		entry string
		want  Command
	}{
		{"\x01" + `{"lock":"jobs.nightly","holder":"worker-1","lease":"` + lease + `","ttl_ms":10000,"request_id":"req-1","now_ms":1790000000000}`,
			&Acquire{Lock: "jobs.nightly", Holder: "worker-1", Lease: lease, TTLMillis: 10000, RequestID: "req-1", NowMillis: 1790000000000}},
		{"\x02" + `{"lock":"a","token":1099511627853,"lease":"` + lease + `","next":{"lock":"","holder":"w2","lease":"` + lease + `","ttl_ms":9000,"request_id":"r2"}}`,
			&Release{Lock: "a", Token: 1<<40 | 77, Lease: lease, Next: &Acquire{Holder: "w2", Lease: lease, TTLMillis: 9000, RequestID: "r2"}}},
		{"\x03" + `{"lock":"a","token":7}`, &Expire{Lock: "a", Token: 7}},
		{"\x04" + `{"key":"k","value":"AAEC/w==","token":99,"lock":"a"}`, &Put{Key: "k", Value: []byte{0, 1, 2, 255}, Token: 99, Lock: "a"}},
	} {
		got, err := Decode([]byte(c.entry))
		if err != nil {
			t.Fatalf("%q: %v", c.entry, err)
		}
		if !reflect.DeepEqual(got, c.want) {
			t.Fatalf("%q decoded as %+v, want %+v", c.entry, got, c.want)
		}
	}
}

func TestBinaryMalformed(t *testing.T) {
	var entries [][]byte
	for _, c := range append(cycleCommands(), principalCommands()...) {
		for format := LogFormatBinary; format <= LogFormat; format++ {
			entry, err := EncodeFormat(c, format)
			if err != nil {
				t.Fatal(err)
			}
			entries = append(entries, entry)
		}
	}
	for _, entry := range entries {
		c, _ := Decode(entry)
		// Every strict prefix is truncated, and one more byte is trailing data.
		for n := 1; n < len(entry); n++ {
			if _, err := Decode(entry[:n]); !errors.Is(err, ErrMalformedCommand) {
				t.Fatalf("%s cut to %d of %d bytes: err %v, want malformed", c.Type(), n, len(entry), err)
			}
		}
		if _, err := Decode(append(entry, 0)); !errors.Is(err, ErrMalformedCommand) {
			t.Fatalf("%s with a trailing byte: err %v, want malformed", c.Type(), err)
		}
	}
	for name, entry := range map[string][]byte{
		"hand-off flag 2": {byte(CmdExpireBinary), 1, 'a', 7, 2},
		"length past end": {byte(CmdPutBinary), 200, 'k'},
		"varint overflow": append([]byte{byte(CmdReleaseBinary), 1, 'a'}, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01),
		"empty acquire":   {byte(CmdAcquireBinary)},
		// A hand-off in the principal form without its principal.
		"hand-off of the plain form": {byte(CmdExpirePrincipal), 1, 'a', 7, 1, 1, 'a', 1, 'w', 1, 'l', 2, 0, 0},
	} {
		if _, err := Decode(entry); !errors.Is(err, ErrMalformedCommand) {
			t.Errorf("%s: err %v, want malformed", name, err)
		}
	}
}

// TestBinaryIsSmaller guards the point of the encoding.
func TestBinaryIsSmaller(t *testing.T) {
	for i, legacy := range legacyEntries(t) {
		entry, _ := Encode(cycleCommands()[i])
		if len(entry) >= len(legacy) {
			t.Errorf("%s: binary %d bytes, JSON %d", cycleCommands()[i].Type(), len(entry), len(legacy))
		}
	}
}

func BenchmarkDecodeAcquire(b *testing.B) {
	binaryEntry, _ := Encode(cycleCommands()[0])
	jsonEntry := legacyEntries(b)[0]
	b.Run("binary", func(b *testing.B) {
		b.ReportAllocs()
		for range b.N {
			if _, err := Decode(binaryEntry); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("json", func(b *testing.B) {
		b.ReportAllocs()
		for range b.N {
			if _, err := Decode(jsonEntry); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// TestEncodeFormatJSON: for a member that reads only JSON, every command is
// written as builds before the binary types wrote it.
func TestEncodeFormatJSON(t *testing.T) {
	for i, c := range cycleCommands() {
		entry, err := EncodeFormat(c, LogFormatJSON)
		if err != nil {
			t.Fatal(err)
		}
		if want := legacyEntries(t)[i]; !bytes.Equal(entry, want) {
			t.Fatalf("%s for a JSON member:\n got %q\nwant %q", c.Type(), entry, want)
		}
		binary, _ := EncodeFormat(c, LogFormatBinary)
		if CommandType(binary[0]) == c.Type() {
			t.Fatalf("%s for a binary member written as type %d", c.Type(), binary[0])
		}
	}
}

// TestEntryBytesGolden pins today's entries byte for byte: binary lock-cycle
// entries as hex, the rare commands as literal JSON. Logs and backups hold
// these bytes, so an encoder change must fail here before it ships. The
// forms of LogFormatBinary are still written for members that read no more.
func TestEntryBytesGolden(t *testing.T) {
	next := &Acquire{Lock: "a", Holder: "w2", Lease: strings.Repeat("b", 32), TTLMillis: 9000, RequestID: "r2", NowMillis: 1_790_000_000_123}
	nextOps := *next
	nextOps.Principal = "ops"
	for _, c := range []struct {
		cmd    Command
		format int
		want   string
	}{
		{&Acquire{Lock: "jobs.nightly", Holder: "worker-1", Lease: strings.Repeat("c", 32), TTLMillis: 10_000, RequestID: "req-1", NowMillis: 1_790_000_000_000}, LogFormatBinary,
			hexEntry("090c6a6f62732e6e696768746c7908776f726b65722d31206363636363636363636363636363636363636363636363636363636363636363a09c01057265712d3180b083c59868")},
		{&Release{Lock: "a", Token: 1<<40 | 77, Lease: strings.Repeat("a", 32)}, LogFormatBinary,
			hexEntry("0a0161cd808080802020616161616161616161616161616161616161616161616161616161616161616100")},
		{&Release{Lock: "a", Token: 7, Lease: "l", Next: next}, LogFormatBinary,
			hexEntry("0a016107016c010161027732206262626262626262626262626262626262626262626262626262626262626262d08c01027232f6b183c59868")},
		{&Expire{Lock: "a", Token: 1<<63 + 5}, LogFormatBinary, hexEntry("0b01618580808080808080800100")},
		{&Expire{Lock: "a", Token: 7, Next: next}, LogFormatBinary,
			hexEntry("0b016107010161027732206262626262626262626262626262626262626262626262626262626262626262d08c01027232f6b183c59868")},
		{&Put{Key: "k", Value: []byte{0, 1, 2, 255}, Token: 99, Lock: "a"}, LogFormatBinary, hexEntry("0c016b04000102ff630161")},
		{&Put{Key: "k", Value: []byte{}, Token: 1}, LogFormatBinary, hexEntry("0c016b000100")},
		// The forms of LogFormatPrincipal: the same bytes under their own
		// type, the principal appended to each acquire body and put.
		{&Acquire{Lock: "jobs.nightly", Holder: "worker-1", Lease: strings.Repeat("c", 32), TTLMillis: 10_000, RequestID: "req-1", NowMillis: 1_790_000_000_000, Principal: "ci"}, LogFormatPrincipal,
			hexEntry("0e0c6a6f62732e6e696768746c7908776f726b65722d31206363636363636363636363636363636363636363636363636363636363636363a09c01057265712d3180b083c59868" + "026369")},
		{&Release{Lock: "a", Token: 1<<40 | 77, Lease: strings.Repeat("a", 32)}, LogFormatPrincipal,
			hexEntry("0f0161cd808080802020616161616161616161616161616161616161616161616161616161616161616100")},
		{&Release{Lock: "a", Token: 7, Lease: "l", Next: &nextOps}, LogFormatPrincipal,
			hexEntry("0f016107016c010161027732206262626262626262626262626262626262626262626262626262626262626262d08c01027232f6b183c59868" + "036f7073")},
		{&Expire{Lock: "a", Token: 7, Next: &nextOps}, LogFormatPrincipal,
			hexEntry("10016107010161027732206262626262626262626262626262626262626262626262626262626262626262d08c01027232f6b183c59868" + "036f7073")},
		{&Put{Key: "k", Value: []byte{0, 1, 2, 255}, Token: 99, Lock: "a", Principal: "ci"}, LogFormatPrincipal, hexEntry("11016b04000102ff630161" + "026369")},
		{&Put{Key: "k", Value: []byte{}, Token: 1}, LogFormatPrincipal, hexEntry("11016b00010000")},
		{&SetMember{Member{ID: "n2", RaftAddr: "127.0.0.1:8002", HTTPAddr: "127.0.0.1:7002", Incarnation: "i1", LogFormat: 1}}, LogFormat,
			"\x05" + `{"id":"n2","raft_addr":"127.0.0.1:8002","http_addr":"127.0.0.1:7002","incarnation":"i1","log_format":1}`},
		{&RemoveMember{ID: "n1"}, LogFormat, "\x06" + `{"id":"n1"}`},
		{&BumpEpoch{Reason: "restore"}, LogFormat, "\x07" + `{"reason":"restore"}`},
		{&SetClusterID{ID: "c1"}, LogFormat, "\x08" + `{"id":"c1"}`},
		{&DeleteKey{Key: "k"}, LogFormat, "\x0d" + `{"key":"k"}`},
		{&SetGrantHistory{GrantHistorySettings{PerLock: 16, Global: 100_000}}, LogFormatHistory, "\x17" + `{"per_lock":16,"global":100000}`},
		// Set-grant-history with permits is written under type 24, which
		// carries them (an older build stops on it); without, as before.
		{&SetGrantHistory{GrantHistorySettings{PerLock: 16, Global: 100_000, Permits: true}}, LogFormatPermitHistory, "\x18" + `{"per_lock":16,"global":100000,"permits":true}`},
		{&SetGrantHistory{GrantHistorySettings{PerLock: 16, Global: 100_000}}, LogFormatPermitHistory, "\x17" + `{"per_lock":16,"global":100000}`},
	} {
		got, err := EncodeFormat(c.cmd, c.format)
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != c.want {
			t.Errorf("%s entry:\n got %x\nwant %x", c.cmd.Type(), got, c.want)
		}
		back, err := Decode([]byte(c.want))
		if want := decodedAs(c.cmd, c.format); err != nil || !reflect.DeepEqual(back, want) {
			t.Errorf("%s entry decodes as %+v (%v), want %+v", c.cmd.Type(), back, err, want)
		}
	}
}

func hexEntry(s string) string {
	b, err := hex.DecodeString(s)
	if err != nil {
		panic(err)
	}
	return string(b)
}
