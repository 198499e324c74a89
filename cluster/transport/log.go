package transport

import (
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
)

// decodeFailed is what hashicorp/raft's NetworkTransport logs, once per
// connection, when the first bytes it reads are not a Raft RPC.
const decodeFailed = "failed to decode incoming command"

// transportLogger is the logger of the Raft transport. It lets through at
// most one "failed to decode incoming command" a minute, with the count of
// those it dropped: a client pointed at the Raft port by mistake (an HTTP
// request is "unknown rpc type 80", the 'P' of POST) would otherwise log one
// error per request, and retrying clients send many.
type transportLogger struct {
	hclog.Logger
	every time.Duration
	now   func() time.Time

	mu      sync.Mutex
	last    time.Time // when the last decode error was logged
	dropped int       // decode errors not logged since
}

func newTransportLogger(l hclog.Logger) *transportLogger {
	return &transportLogger{Logger: l, every: time.Minute, now: time.Now}
}

// Error logs msg, unless it is a decode error logged less than a minute ago.
func (l *transportLogger) Error(msg string, args ...any) {
	if msg != decodeFailed {
		l.Logger.Error(msg, args...)
		return
	}
	l.mu.Lock()
	now := l.now()
	if !l.last.IsZero() && now.Sub(l.last) < l.every {
		l.dropped++
		l.mu.Unlock()
		return
	}
	dropped := l.dropped
	l.last, l.dropped = now, 0
	l.mu.Unlock()
	if strings.Contains(fmt.Sprint(args...), "unknown rpc type") {
		args = append(args, "hint", "a client that is not a Raft peer connected; is an HTTP client pointed at the Raft port?")
	}
	if dropped > 0 {
		args = append(args, "not_logged_since", dropped)
	}
	l.Logger.Error(msg, args...)
}
