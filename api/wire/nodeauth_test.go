package wire

import (
	"strings"
	"testing"
)

func TestNodeAuthorization(t *testing.T) {
	v := NodeAuthorization("n2", "s3cret:with:colons")
	if !strings.HasPrefix(v, "Fencer-Node ") {
		t.Fatalf("NodeAuthorization = %q", v)
	}
	if id, secret, ok := ParseNodeAuthorization(v); !ok || id != "n2" || secret != "s3cret:with:colons" {
		t.Fatalf("round trip: %q %q %v", id, secret, ok)
	}
	if _, _, ok := ParseNodeAuthorization("fencer-node " + strings.TrimPrefix(v, "Fencer-Node ")); !ok {
		t.Fatal("the scheme is case-insensitive")
	}
	for _, bad := range []string{
		"", "Fencer-Node", "Fencer-Node ", "Bearer " + strings.TrimPrefix(v, "Fencer-Node "),
		"Fencer-Node  " + strings.TrimPrefix(v, "Fencer-Node "), // two spaces
		"Fencer-Node bjI6",                   // "n2:": no secret
		"Fencer-Node OnNlY3JldA==",           // ":secret": no id
		"Fencer-Node bi8yOnNlY3JldA==",       // "n/2:secret": not a node id
		"Fencer-Node bjJzZWNyZXQ=",           // "n2secret": no colon
		"Fencer-Node bjI6c2VjcmU",            // "n2:secre" unpadded
		"Fencer-Node bjI6c2Vj\ncmV0",         // a line break inside
		"Fencer-Node " + v[len(v)-4:] + "!!", // not base64
	} {
		if id, secret, ok := ParseNodeAuthorization(bad); ok {
			t.Errorf("ParseNodeAuthorization(%q) = %q, %q, true", bad, id, secret)
		}
	}
}

// FuzzParseNodeAuthorization: whatever parses names a valid node id and a
// secret, and is exactly what NodeAuthorization writes for them (the
// scheme's case aside); what NodeAuthorization writes for a valid id and a
// secret parses back to them.
func FuzzParseNodeAuthorization(f *testing.F) {
	f.Add("Fencer-Node "+"bjI6c2VjcmV0", "n2", "secret")
	f.Add("fencer-node bjI6c2VjcmV0", "n.1_a-b", "a:b")
	f.Add("Bearer abc", "", "x")
	f.Fuzz(func(t *testing.T, header, id, secret string) {
		if gotID, gotSecret, ok := ParseNodeAuthorization(header); ok {
			if !ValidNodeID(gotID) || gotSecret == "" {
				t.Fatalf("%q parsed to %q, %q", header, gotID, gotSecret)
			}
			if again := NodeAuthorization(gotID, gotSecret); !strings.EqualFold(again[:12], header[:12]) || again[12:] != header[12:] {
				t.Fatalf("%q parsed to %q, %q, which write as %q", header, gotID, gotSecret, again)
			}
		}
		if !ValidNodeID(id) || secret == "" {
			return
		}
		if gotID, gotSecret, ok := ParseNodeAuthorization(NodeAuthorization(id, secret)); !ok || gotID != id || gotSecret != secret {
			t.Fatalf("NodeAuthorization(%q, %q) parsed to %q, %q, %v", id, secret, gotID, gotSecret, ok)
		}
	})
}
