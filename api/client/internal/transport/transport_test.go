package transport

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/fencer-io/fencer/api/wire"
)

// Backoff doubles from MinBackoff up to MaxBackoff, and its jitter keeps
// each pause within the upper half of its step.
func TestBackoff(t *testing.T) {
	r := Retry{Attempts: 8, MinBackoff: 50 * time.Millisecond, MaxBackoff: time.Second}
	for n, step := range map[int]time.Duration{1: 50 * time.Millisecond, 2: 100 * time.Millisecond, 5: 800 * time.Millisecond, 6: time.Second, 60: time.Second} {
		for range 100 {
			if d := r.Backoff(n); d < step/2 || d > step {
				t.Fatalf("Backoff(%d) = %v, want %v to %v", n, d, step/2, step)
			}
		}
	}
}

// Answers that say "try again, maybe elsewhere" are retried; a definite
// answer, and a 503 the server gives for its own failure, are not.
func TestRetryable(t *testing.T) {
	for _, tt := range []struct {
		status int
		body   string
		want   bool
	}{
		{http.StatusServiceUnavailable, `{"code":"no_leader","error":"m"}`, true},
		{http.StatusServiceUnavailable, `{"code":"outcome_unknown","error":"m"}`, true},
		{http.StatusServiceUnavailable, `<html>proxy</html>`, true},
		{http.StatusServiceUnavailable, `{"code":"internal","error":"token space exhausted"}`, false},
		{http.StatusBadGateway, ``, true},
		{http.StatusGatewayTimeout, ``, true},
		{http.StatusInternalServerError, `{"code":"internal","error":"m"}`, false},
		{http.StatusConflict, `{"code":"lock_held","error":"m"}`, false},
		{http.StatusOK, `{}`, false},
	} {
		r := &Response{Status: tt.status, Body: []byte(tt.body)}
		if got := r.retryable(); got != tt.want {
			t.Errorf("HTTP %d %s: retryable %v, want %v", tt.status, tt.body, got, tt.want)
		}
	}
}

// readBody reads what io.ReadAll would, up to one byte past its limit
// (here wire.MaxBodyBytes), whether the answer states its length, states a
// wrong one, or none.
func TestReadBody(t *testing.T) {
	big := strings.Repeat("x", wire.MaxBodyBytes+10)
	for _, tc := range []struct {
		name   string
		body   string
		length int64
		want   string
	}{
		{"stated", `{"a":1}`, 7, `{"a":1}`},
		{"empty", ``, 0, ``},
		{"longer than stated", `{"a":1}trailing`, 7, `{"a":1}trailing`},
		{"unstated", `{"a":1}`, -1, `{"a":1}`},
		{"too long, stated", big, int64(len(big)), big[:wire.MaxBodyBytes+1]},
		{"too long, stated short", big, 7, big[:wire.MaxBodyBytes+1]},
		{"too long, unstated", big, -1, big[:wire.MaxBodyBytes+1]},
	} {
		resp := &http.Response{Body: io.NopCloser(strings.NewReader(tc.body)), ContentLength: tc.length}
		got, err := readBody(resp, wire.MaxBodyBytes)
		if err != nil || string(got) != tc.want {
			t.Errorf("%s: %d bytes, %v; want %d bytes", tc.name, len(got), err, len(tc.want))
		}
	}
}
