package transport

import (
	"net/http"
	"testing"
	"time"
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
