package entry

import (
	"bytes"
	"errors"
	"testing"
)

// TestCommandsTable: every row is consistent with its command, and the type
// bytes a log can hold are exactly those of the table.
func TestCommandsTable(t *testing.T) {
	names := map[string]bool{}
	for _, spec := range commands {
		cmd := spec.empty()
		if cmd.Type() != spec.typ {
			t.Errorf("row %s makes a command of type %s", spec.typ, cmd.Type())
		}
		if names[spec.name] {
			t.Errorf("name %q is used twice", spec.name)
		}
		names[spec.name] = true
		for format := LogFormatJSON; format <= LogFormat; format++ {
			entry, err := EncodeFormat(cmd, format)
			if format < spec.since {
				// Members that read less are never sent it.
				if !errors.Is(err, ErrFormatTooOld) {
					t.Errorf("%s in format %d: err %v, want ErrFormatTooOld", spec.name, format, err)
				}
				continue
			}
			if err != nil {
				t.Fatalf("%s: %v", spec.name, err)
			}
			want := spec.typ
			if f := spec.form(format, fieldsFormat(cmd)); f != nil {
				want = f.typ
				if f.format > format {
					t.Errorf("%s: form %d of format %d written for format %d", spec.name, f.typ, f.format, format)
				}
			}
			if CommandType(entry[0]) != want {
				t.Errorf("%s in format %d starts with type %d, want %d", spec.name, format, entry[0], want)
			}
			// Compared as entries: a nil value comes back from binary as an
			// empty one, which encodes alike.
			back, err := Decode(entry)
			if err != nil || back.Type() != spec.typ {
				t.Fatalf("%s in format %d decodes as %+v (%v)", spec.name, format, back, err)
			}
			if again, _ := EncodeFormat(back, format); !bytes.Equal(again, entry) {
				t.Errorf("%s in format %d: %q decodes to a command written as %q", spec.name, format, entry, again)
			}
		}
	}
	// The type bytes in use: 1-32, nothing else.
	for t8 := range 256 {
		typ := CommandType(t8)
		_, err := Decode([]byte{byte(typ)})
		var unknown *UnknownCommandError
		if known := t8 >= 1 && t8 <= 32; known == errors.As(err, &unknown) {
			t.Errorf("type byte %d: known %v, decode error %v", t8, known, err)
		}
	}
}

func TestCommandTypeNames(t *testing.T) {
	for typ, want := range map[CommandType]string{
		CmdAcquire: "acquire", CmdSetClusterID: "set-cluster-id",
		CmdReleaseBinary: "release(binary)", CmdReleasePrincipal: "release(principal)",
		CmdDeleteKey: "delete-key", CmdSetGrantHistoryPermits: "set-grant-history(permits)", 0: "unknown(0)", 200: "unknown(200)",
	} {
		if got := typ.String(); got != want {
			t.Errorf("type %d is called %q, want %q", uint8(typ), got, want)
		}
	}
}

// A type byte used twice would make one of its commands undecodable: the
// table refuses to load.
func TestCommandsTableRefusesDuplicateTypeByte(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Fatal("a table with type byte 9 twice was indexed")
		}
	}()
	indexCommands([]commandSpec{
		{typ: CmdAcquire, name: "acquire", empty: func() Command { return &Acquire{} },
			forms: []*binaryForm{binaryOf(CmdAcquireBinary, LogFormatBinary, plainLayout.readAcquire, plainLayout.appendAcquire)}},
		{typ: CmdAcquireBinary, name: "clash", empty: func() Command { return &Acquire{} }},
	})
}

// Recording permits is the cluster's decision: it needs a member format
// that reads type 24, and a type-23 entry never carries it, as an older
// build would read it without (and keep no permits).
func TestPermitHistoryNeedsItsFormat(t *testing.T) {
	c := &SetGrantHistory{GrantHistorySettings{PerLock: 4, Global: 10, Permits: true}}
	if _, err := EncodeFormat(c, LogFormatPermitDelay); !errors.Is(err, ErrFormatTooOld) {
		t.Fatalf("permits for members of format %d: %v, want ErrFormatTooOld", LogFormatPermitDelay, err)
	}
	back, err := Decode([]byte("\x17" + `{"per_lock":4,"global":10,"permits":true}`))
	if err != nil {
		t.Fatal(err)
	}
	if back.(*SetGrantHistory).Permits {
		t.Fatal("a type-23 entry turned permits on")
	}
}

// A member record that carries a key is written under a type of its own
// (25), which a build from before member keys stops on: under set-member's
// type 5 such a build decoded it, dropped the key without a word and its
// state diverged (found by a review). A record without a key is type 5 as
// before, whatever the format. Fails with set-member's keyed form removed.
func TestKeyedMemberHasATypeOfItsOwn(t *testing.T) {
	keyed := &SetMember{Member: Member{ID: "n2", RaftAddr: "r2", HTTPAddr: "h2", LogFormat: LogFormat, Key: "k"}}
	entry, err := EncodeFormat(keyed, LogFormat)
	if err != nil || CommandType(entry[0]) != CmdSetMemberKey {
		t.Fatalf("a keyed member record: %q %v, want type %d", entry, err, CmdSetMemberKey)
	}
	back, err := Decode(entry)
	if m, ok := back.(*SetMember); err != nil || !ok || m.Member != keyed.Member {
		t.Fatalf("decoded %+v %v, want %+v", back, err, keyed)
	}
	plain, _ := EncodeFormat(&SetMember{Member: Member{ID: "n2"}}, LogFormat)
	if CommandType(plain[0]) != CmdSetMember {
		t.Fatalf("a record without a key starts with type %d, want %d", plain[0], CmdSetMember)
	}
	if _, err := EncodeFormat(keyed, LogFormatPermitHistory); !errors.Is(err, ErrFormatTooOld) {
		t.Fatalf("a keyed record for members of format 6: %v, want ErrFormatTooOld", err)
	}
}

// A session's end carries its hand-off's principal through the log, whatever
// the acquire's other fields: without it the waiter's request id would be
// remembered as nobody's, for another principal to replay (fails with the
// acquire's own JSON, which leaves the principal out).
func TestSessionEndKeepsTheHandOffsPrincipal(t *testing.T) {
	cmd := &SessionEnd{Session: 7, Expired: true, Next: []*Acquire{{Lock: "a", Holder: "w", Lease: "l", TTLMillis: 1000, RequestID: "r", Principal: "jobs"}}}
	data, err := EncodeFormat(cmd, LogFormatSession)
	if err != nil {
		t.Fatal(err)
	}
	back, err := Decode(data)
	if err != nil {
		t.Fatal(err)
	}
	end := back.(*SessionEnd)
	if len(end.Next) != 1 || end.Next[0].Principal != "jobs" || end.Next[0].RequestID != "r" || end.Session != 7 || !end.Expired {
		t.Fatalf("decoded %+v (next %+v)", end, end.Next)
	}
}

// A revoke's hand-off keeps its principal through the log (an acquire's
// own JSON leaves it out unless it has a lock-delay or a value), and a
// permit's hand-off keeps its own.
func TestRevokeKeepsTheHandOffsPrincipal(t *testing.T) {
	for _, c := range []*Revoke{
		{Lock: "a", Token: 1, Next: &Acquire{Lock: "a", Holder: "h", Lease: "x", TTLMillis: 5, Principal: "p"}},
		{Semaphore: "s", Token: 1, NextPermit: &SemAcquire{Semaphore: "s", Holder: "h", Lease: "x", TTLMillis: 5, Limit: 1, Principal: "p"}},
		{Session: 3, Next: &Acquire{Lock: "a", Holder: "h", Lease: "x", TTLMillis: 5}},
	} {
		b, err := Encode(c)
		if err != nil {
			t.Fatal(err)
		}
		back, err := Decode(b)
		if err != nil {
			t.Fatal(err)
		}
		got := back.(*Revoke)
		switch {
		case c.Next != nil && got.Next.Principal != c.Next.Principal:
			t.Errorf("%s: the hand-off's principal %q, want %q", b, got.Next.Principal, c.Next.Principal)
		case c.NextPermit != nil && got.NextPermit.Principal != c.NextPermit.Principal:
			t.Errorf("%s: the permit hand-off's principal %q, want %q", b, got.NextPermit.Principal, c.NextPermit.Principal)
		}
	}
}
