package watch

import (
	"bufio"
	"strings"
	"testing"
	"time"
)

// An event stream's lines end with "\r\n", "\n" or "\r", alone or mixed,
// and a line left unfinished at the end is dropped with its event.
func TestScanLines(t *testing.T) {
	s := bufio.NewScanner(strings.NewReader("a\r\nb\nc\rd\r\r\ne\n\nunfinished"))
	s.Split(scanLines)
	var got []string
	for s.Scan() {
		got = append(got, s.Text())
	}
	want := []string{"a", "b", "c", "d", "", "e", ""}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("lines %q, want %q", got, want)
	}
}

// An event is its fields up to a blank line: data lines join with "\n",
// comments and unknown fields are skipped, the id counts only once seen,
// and a retry: field that is not a number is ignored.
func TestEventLines(t *testing.T) {
	var ev sseEvent
	for _, l := range []string{": keep-alive", "event: acquired", "data: {\"a\":", "data:1}", "id: 42", "retry: 250", "unknown: x"} {
		if ev.line([]byte(l)) {
			t.Fatalf("%q ended the event", l)
		}
	}
	if !ev.line(nil) {
		t.Fatal("a blank line did not end the event")
	}
	if ev.typ != "acquired" || string(ev.data) != "{\"a\":\n1}\n" || ev.id != "42" || !ev.hasID || ev.retry != 250*time.Millisecond {
		t.Fatalf("event %+v", ev)
	}
	var bare sseEvent
	for _, l := range []string{"data: x", "retry: soon", "id: a\x00b"} {
		bare.line([]byte(l))
	}
	if bare.hasID || bare.retry != 0 {
		t.Fatalf("an id with NUL, or a retry that is no number, was taken: %+v", bare)
	}
}
