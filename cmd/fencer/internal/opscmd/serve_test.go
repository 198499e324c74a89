package opscmd

import (
	"bytes"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

// A node that would listen beyond loopback with neither TLS nor access
// control refuses to start, and says why; --insecure overrides.
func TestServeRefusesInsecureNetworkAddress(t *testing.T) {
	for _, args := range [][]string{
		{"--http-addr", "0.0.0.0:0", "--raft-addr", "127.0.0.1:0"},
		{"--http-addr", "127.0.0.1:0", "--raft-addr", "0.0.0.0:0"},
	} {
		var stdout, stderr bytes.Buffer
		cmd := serveCmd(&stdout, &stderr)
		cmd.SetArgs(append([]string{"--id", "n1", "--data-dir", t.TempDir(), "--bootstrap"}, args...))
		err := cmd.Execute()
		if err == nil || !strings.Contains(err.Error(), "refusing") || !strings.Contains(err.Error(), "--insecure") {
			t.Fatalf("serve %v: %v, want a refusal naming --insecure", args, err)
		}
	}
	if !isLoopback("127.0.0.1:7001") || !isLoopback("[::1]:7001") || !isLoopback("localhost:1") || isLoopback("10.0.0.1:7001") || isLoopback(":7001") {
		t.Fatal("isLoopback misclassifies")
	}
}

// --http-advertise-addr is what the node tells others (its member record),
// while it keeps listening on --http-addr; an address nobody could dial is
// refused with the flag's name.
func TestServeAdvertisesHTTPAddr(t *testing.T) {
	o := &serveOptions{id: "n1", dataDir: t.TempDir(), bootstrap: true,
		httpAddr: "127.0.0.1:7001", raftAddr: "127.0.0.1:8001", httpAdvertise: "127.0.0.1:9001"}
	cfg, err := o.config()
	if err != nil {
		t.Fatal(err)
	}
	if cfg.HTTPAddr != "127.0.0.1:9001" {
		t.Fatalf("advertised %q, want the --http-advertise-addr", cfg.HTTPAddr)
	}
	o.httpAdvertise = ""
	if cfg, err = o.config(); err != nil || cfg.HTTPAddr != "127.0.0.1:7001" {
		t.Fatalf("without --http-advertise-addr: %q, %v; want --http-addr advertised", cfg.HTTPAddr, err)
	}
	for _, bad := range []string{"127.0.0.1", "127.0.0.1:0", ":9001", "nope"} {
		o.httpAdvertise = bad
		if _, err := o.config(); err == nil || !strings.Contains(err.Error(), "--http-advertise-addr") {
			t.Errorf("--http-advertise-addr %q: %v, want a refusal naming the flag", bad, err)
		}
	}
}

// The fenced store's limits: their defaults, their environment variables,
// and a negative one refused with the flags' names.
func TestServeKVLimitFlags(t *testing.T) {
	for flag, want := range map[string]string{"max-kv-bytes": "268435456", "max-keys": "1000000", "max-kv-bytes-per-principal": "67108864"} {
		if got := NewServeCmd().Flags().Lookup(flag).DefValue; got != want {
			t.Errorf("--%s defaults to %s, want %s", flag, got, want)
		}
	}
	t.Setenv("FENCER_MAX_KV_BYTES", "4096")
	t.Setenv("FENCER_MAX_KEYS", "10")
	t.Setenv("FENCER_MAX_KV_BYTES_PER_PRINCIPAL", "1024")
	fs := NewServeCmd().Flags()
	for flag, want := range map[string]string{"max-kv-bytes": "4096", "max-keys": "10", "max-kv-bytes-per-principal": "1024"} {
		if got := fs.Lookup(flag).Value.String(); got != want {
			t.Errorf("--%s from the environment is %s, want %s", flag, got, want)
		}
	}
	o := &serveOptions{id: "n1", dataDir: t.TempDir(), bootstrap: true, httpAddr: "127.0.0.1:7001", raftAddr: "127.0.0.1:8001", maxKeys: -1}
	if _, err := o.config(); err == nil || !strings.Contains(err.Error(), "--max-keys") {
		t.Fatalf("--max-keys -1: %v", err)
	}
}

// With an ACL and no TLS, a node that is to join others needs the cluster
// secret, which must be long enough and which the ACL file cannot grant.
func TestServeClusterSecretRules(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	const secret = "cluster-secret-0123456789abcdef0123456789"
	aclFile := write("acl.json", `{"tokens":[{"name":"ops","secret":"operator-secret-0123456789","role":"operator","keys":["*"]}]}`)
	granting := write("granting.json", `{"tokens":[{"name":"ops","secret":"`+secret+`","role":"operator","keys":["*"]}]}`)
	secretFile := write("cluster.secret", secret+"\n")
	short := write("short.secret", "0123456789abcdef\n")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--acl-file", aclFile, "--join", "127.0.0.1:1"}, "--cluster-secret-file"},
		{[]string{"--acl-file", aclFile, "--join", "127.0.0.1:1", "--cluster-secret-file", short}, "at least 32 characters"},
		{[]string{"--acl-file", granting, "--join", "127.0.0.1:1", "--cluster-secret-file", secretFile}, "is the cluster secret"},
	} {
		var stdout, stderr bytes.Buffer
		cmd := serveCmd(&stdout, &stderr)
		cmd.SetArgs(append([]string{"--id", "n2", "--data-dir", t.TempDir(), "--http-addr", "127.0.0.1:0", "--raft-addr", "127.0.0.1:0"}, tc.args...))
		if err := cmd.Execute(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("serve %v: %v, want an error saying %q", tc.args, err, tc.want)
		}
	}
}

// --allowed-hosts (or $FENCER_ALLOWED_HOSTS) lists the host names a node
// without access control answers to; a port or a scheme is refused.
func TestServeAllowedHosts(t *testing.T) {
	t.Setenv("FENCER_ALLOWED_HOSTS", "from-env.example")
	if got := NewServeCmd().Flags().Lookup("allowed-hosts").DefValue; got != "from-env.example" {
		t.Fatalf("$FENCER_ALLOWED_HOSTS: flag default %q", got)
	}
	o := &serveOptions{httpAddr: "127.0.0.1:7001", raftAddr: "127.0.0.1:8001", allowedHosts: "fencer.internal, n1.example.com.,,"}
	cfg, _ := (&serveOptions{id: "n1", dataDir: t.TempDir(), bootstrap: true, httpAddr: "127.0.0.1:7001", raftAddr: "127.0.0.1:8001"}).config()
	opts, err := o.security(&cfg, slog.New(slog.DiscardHandler))
	if err != nil || !slices.Equal(opts.AllowedHosts, []string{"fencer.internal", "n1.example.com."}) {
		t.Fatalf("allowed hosts %q, %v", opts.AllowedHosts, err)
	}
	for _, bad := range []string{"fencer.internal:7001", "http://fencer.internal", "a b", "*.example.com"} {
		o.allowedHosts = bad
		if _, err := o.security(&cfg, slog.New(slog.DiscardHandler)); err == nil || !strings.Contains(err.Error(), "--allowed-hosts") {
			t.Errorf("--allowed-hosts %q: %v, want a refusal naming the flag", bad, err)
		}
	}
}

// --log-store defaults to bolt, reads FENCER_LOG_STORE, reaches the node's
// configuration, and refuses a kind that does not exist.
func TestServeLogStoreFlag(t *testing.T) {
	if got := NewServeCmd().Flags().Lookup("log-store").DefValue; got != "bolt" {
		t.Errorf("--log-store defaults to %s", got)
	}
	t.Setenv("FENCER_LOG_STORE", "wal")
	if got := NewServeCmd().Flags().Lookup("log-store").Value.String(); got != "wal" {
		t.Errorf("--log-store from the environment is %s", got)
	}
	o := &serveOptions{id: "n1", dataDir: t.TempDir(), bootstrap: true, httpAddr: "127.0.0.1:7001", raftAddr: "127.0.0.1:8001", logStore: "wal"}
	if cfg, err := o.config(); err != nil || cfg.LogStore != "wal" {
		t.Fatalf("--log-store wal: %v %v", cfg.LogStore, err)
	}
	o.logStore = "rocks"
	if _, err := o.config(); err == nil || !strings.Contains(err.Error(), "--log-store") || !strings.Contains(err.Error(), "want bolt or wal") {
		t.Fatalf("--log-store rocks: %v", err)
	}
}

// serveCmd is "fencer serve" writing to stdout and stderr.
func serveCmd(stdout, stderr io.Writer) *cobra.Command {
	cmd := NewServeCmd()
	cmd.SetOut(stdout)
	cmd.SetErr(stderr)
	return cmd
}
