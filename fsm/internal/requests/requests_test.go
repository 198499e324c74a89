package requests

import (
	"fmt"
	"testing"
)

// Past Max the oldest request ids are forgotten, in the order granted, and
// a captured Records is never written by later grants.
func TestOldestForgottenFirst(t *testing.T) {
	tb := New()
	for i := range Max {
		tb.Remember(fmt.Sprint(i), uint64(i+1))
	}
	tb.Remember("0", 99) // already granted: unchanged
	captured := tb.Records()
	tb.Remember("new", 1<<20)
	tb.Remember("newer", 1<<21)
	if _, ok := tb.Token("0"); ok {
		t.Fatal("the oldest request id was kept")
	}
	if _, ok := tb.Token("1"); ok {
		t.Fatal("the second oldest request id was kept")
	}
	if token, ok := tb.Token("2"); !ok || token != 3 {
		t.Fatalf("request 2: %d %v", token, ok)
	}
	if tb.Len() != Max || len(captured) != Max || captured[0].Key != "0" || captured[0].Token != 1 || captured[Max-1].Key != fmt.Sprint(Max-1) {
		t.Fatalf("len %d, captured %d from %+v", tb.Len(), len(captured), captured[0])
	}
}
