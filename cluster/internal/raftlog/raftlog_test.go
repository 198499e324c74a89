package raftlog

import (
	"errors"
	"fmt"
	"io"
	"syscall"
	"testing"

	"github.com/hashicorp/go-hclog"
)

func TestPeerWentAwayDropsOnlyAPeersClose(t *testing.T) {
	const msg = "failed to decode incoming command"
	reset := fmt.Errorf("read tcp: %w", syscall.ECONNRESET)
	for _, c := range []struct {
		level hclog.Level
		msg   string
		err   error
		drop  bool
	}{
		{hclog.Error, msg, reset, true},
		{hclog.Error, msg, io.EOF, true},
		{hclog.Error, msg, errors.New("msgpack decode error: bad type"), false},
		{hclog.Error, "failed to accept connection", reset, false},
		{hclog.Warn, msg, reset, false},
	} {
		if got := peerWentAway(c.level, c.msg, "error", c.err); got != c.drop {
			t.Errorf("%v %q %v: dropped %v, want %v", c.level, c.msg, c.err, got, c.drop)
		}
	}
}
