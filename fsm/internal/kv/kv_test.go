package kv

import (
	"testing"

	"github.com/fencer-io/fencer/fsm/entry"
)

// The byte counts follow every set, replacement and delete.
func TestBytesPerWriter(t *testing.T) {
	tb := New()
	tb.Set(&entry.FencedKey{Key: "a", Value: []byte("12345"), Token: 1, Principal: "p"})
	tb.Set(&entry.FencedKey{Key: "b", Value: []byte("12"), Token: 2, Principal: "q"})
	tb.Set(&entry.FencedKey{Key: "a", Value: []byte("1"), Token: 3, Principal: "q"})
	if tb.Len() != 2 || tb.Bytes() != 3 || tb.BytesOf("p") != 0 || tb.BytesOf("q") != 3 || tb.Mark("a") != 3 {
		t.Fatalf("%d keys, %d bytes, p %d, q %d, mark %d", tb.Len(), tb.Bytes(), tb.BytesOf("p"), tb.BytesOf("q"), tb.Mark("a"))
	}
	if old, ok := tb.Delete("b"); !ok || old.Token != 2 {
		t.Fatalf("delete: %+v %v", old, ok)
	}
	if _, ok := tb.Delete("b"); ok || tb.Bytes() != 1 || tb.Mark("b") != 0 || len(tb.byPrincipal) != 1 {
		t.Fatalf("after delete: %d bytes, %d writers", tb.Bytes(), len(tb.byPrincipal))
	}
}
