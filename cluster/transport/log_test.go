package transport

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
)

// A burst of decode errors (an HTTP client retrying against the Raft port)
// logs one line a minute, which counts the rest; other errors pass.
func TestTransportLoggerLimitsDecodeErrors(t *testing.T) {
	var buf bytes.Buffer
	now := time.Unix(1_000_000, 0)
	l := newTransportLogger(hclog.New(&hclog.LoggerOptions{Output: &buf, Level: hclog.Debug}))
	l.now = func() time.Time { return now }
	lines := func() []string { return strings.Split(strings.TrimSpace(buf.String()), "\n") }

	for range 100 {
		l.Error(decodeFailed, "error", "unknown rpc type 80")
		now = now.Add(100 * time.Millisecond)
	}
	if got := lines(); len(got) != 1 || !strings.Contains(got[0], "unknown rpc type 80") || !strings.Contains(got[0], "Raft port") {
		t.Fatalf("first 10 s of a burst logged:\n%s", buf.String())
	}
	l.Error("failed to flush response", "error", "broken pipe")
	if len(lines()) != 2 {
		t.Fatalf("another error was held back:\n%s", buf.String())
	}
	now = now.Add(time.Minute)
	l.Error(decodeFailed, "error", "unknown rpc type 71")
	if got := lines(); len(got) != 3 || !strings.Contains(got[2], "not_logged_since=99") {
		t.Fatalf("a minute later:\n%s", buf.String())
	}
}
