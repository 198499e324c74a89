package limits

import (
	"testing"
	"time"
)

// A client gets its burst, then one token per 1/rate; another client has
// its own bucket; the wait said is the time until the next token.
func TestBuckets(t *testing.T) {
	now := time.Unix(1000, 0)
	b := NewBuckets(2, 3)
	b.now = func() time.Time { return now }
	for i := 0; i < 3; i++ {
		if ok, _ := b.Allow("a"); !ok {
			t.Fatalf("call %d of the burst refused", i+1)
		}
	}
	ok, wait := b.Allow("a")
	if ok || wait != 500*time.Millisecond {
		t.Fatalf("past the burst: ok=%v wait=%v, want refused for 500ms", ok, wait)
	}
	if ok, _ := b.Allow("b"); !ok {
		t.Fatal("another client shares the first one's bucket")
	}
	now = now.Add(500 * time.Millisecond)
	if ok, _ := b.Allow("a"); !ok {
		t.Fatal("no token after 1/rate")
	}
	if ok, _ := b.Allow("a"); ok {
		t.Fatal("two tokens after 1/rate")
	}
}
