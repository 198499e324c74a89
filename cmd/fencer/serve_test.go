package main

import (
	"bytes"
	"strings"
	"testing"
)

// A node that would listen beyond loopback with neither TLS nor access
// control refuses to start, and says why; --insecure overrides.
func TestServeRefusesInsecureNetworkAddress(t *testing.T) {
	for _, args := range [][]string{
		{"--http-addr", "0.0.0.0:0", "--raft-addr", "127.0.0.1:0"},
		{"--http-addr", "127.0.0.1:0", "--raft-addr", "0.0.0.0:0"},
	} {
		var stdout, stderr bytes.Buffer
		cmd := newRootCmd(&stdout, &stderr)
		cmd.SetArgs(append([]string{"serve", "--id", "n1", "--data-dir", t.TempDir(), "--bootstrap"}, args...))
		err := cmd.Execute()
		if err == nil || !strings.Contains(err.Error(), "refusing") || !strings.Contains(err.Error(), "--insecure") {
			t.Fatalf("serve %v: %v, want a refusal naming --insecure", args, err)
		}
	}
	if !isLoopback("127.0.0.1:7001") || !isLoopback("[::1]:7001") || !isLoopback("localhost:1") || isLoopback("10.0.0.1:7001") || isLoopback(":7001") {
		t.Fatal("isLoopback misclassifies")
	}
}
