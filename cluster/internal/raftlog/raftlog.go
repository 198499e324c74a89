// Package raftlog is hashicorp/raft's own logger for a node: its name and
// level, and the transport's error for a peer that went away left out.
package raftlog

import (
	"errors"
	"io"
	"net"
	"os"
	"syscall"

	"github.com/hashicorp/go-hclog"
)

// New is hashicorp/raft's logger for the node id, at level (an hclog level
// name: "warn", "info", …), writing to stderr.
func New(id, level string) hclog.Logger {
	return hclog.New(&hclog.LoggerOptions{
		Name:    "raft." + id,
		Level:   hclog.LevelFromString(level),
		Output:  os.Stderr,
		Exclude: peerWentAway,
	})
}

// peerWentAway drops the transport's error for an incoming connection that
// its peer closed or reset: every peer restart or stop causes one, it says
// nothing about this node, and as an ERROR it would page someone for a
// rolling restart. Any other decode failure is still logged.
func peerWentAway(level hclog.Level, msg string, args ...any) bool {
	if level != hclog.Error || msg != "failed to decode incoming command" {
		return false
	}
	for _, a := range args {
		if err, ok := a.(error); ok {
			return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
				errors.Is(err, syscall.ECONNRESET) || errors.Is(err, net.ErrClosed)
		}
	}
	return false
}
