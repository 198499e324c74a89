package opscmd

// serveconfig.go turns serve's flags into the node's configuration and its
// security settings, refusing combinations that cannot work.

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"regexp"
	"strings"

	"github.com/fencer-io/fencer/cluster"
	"github.com/fencer-io/fencer/cluster/logstore"
	"github.com/fencer-io/fencer/cluster/transport"
	"github.com/fencer-io/fencer/cmd/fencer/internal/cli"
	"github.com/fencer-io/fencer/fsm/entry"
	"github.com/fencer-io/fencer/internal/acl"
	"github.com/fencer-io/fencer/internal/server"
	"github.com/fencer-io/fencer/internal/tlsutil"
)

// config turns the flags into the node's Raft configuration, checking them.
//
// It is long because it maps each flag to its Config field, one line each.
func (o *serveOptions) config() (cluster.Config, error) {
	cfg := cluster.Config{
		ID:        o.id,
		DataDir:   o.dataDir,
		RaftAddr:  o.raftAddr,
		HTTPAddr:  o.httpAddr,
		Bootstrap: o.bootstrap,
		Replace:   o.replace,
		NonVoter:  o.nonVoter,

		SnapshotThreshold:  o.snapThreshold,
		TrailingLogs:       o.trailingLogs,
		HeartbeatTimeout:   o.electionTO,
		ElectionTimeout:    o.electionTO,
		LeaderLeaseTimeout: o.electionTO,
		StallTimeout:       o.stallTO,
		LogStore:           logstore.Kind(o.logStore),
	}
	if o.httpAdvertise != "" {
		if err := checkAdvertise(o.httpAdvertise); err != nil {
			return cfg, err
		}
		cfg.HTTPAddr = o.httpAdvertise
	}
	if o.peerProxy != "" {
		peers, err := transport.ParsePeerAddrs(o.peerProxy)
		if err != nil {
			return cfg, err
		}
		cfg.PeerAddrs = peers
	}
	cfg.PeerAddrsFile = o.peerProxyFile
	if o.id == "" {
		return cfg, cli.Usagef("--id is required")
	}
	if o.dataDir == "" {
		return cfg, cli.Usagef("--data-dir is required")
	}
	if _, err := logstore.ParseKind(o.logStore); err != nil {
		return cfg, cli.Usagef("--log-store %q: want bolt or wal", o.logStore)
	}
	if o.maxKVBytes < 0 || o.maxKeys < 0 || o.maxKVBytesPer < 0 {
		return cfg, cli.Usagef("--max-kv-bytes, --max-keys and --max-kv-bytes-per-principal: want a positive number (0: the default)")
	}
	if err := o.grantSettings().Validate(); err != nil {
		return cfg, cli.Usagef("--grant-history, --grant-history-per-lock: %v", err)
	}
	for _, a := range strings.Split(o.join, ",") {
		if a = strings.TrimSpace(a); a != "" {
			cfg.Join = append(cfg.Join, a)
		}
	}
	if o.initialCluster != "" {
		peers, err := cluster.ParseInitialCluster(o.initialCluster)
		if err != nil {
			return cfg, err
		}
		cfg.InitialCluster = peers
	}
	if !cfg.Bootstrap && len(cfg.Join) == 0 && len(cfg.InitialCluster) == 0 {
		if !logstore.Exists(o.dataDir) {
			return cfg, cli.Usagef("a new node needs --bootstrap, --join or --initial-cluster")
		}
	}
	return cfg, cfg.Validate()
}

// security sets up TLS, the ACL and the rate limit, and refuses a node that
// would listen beyond loopback with neither encryption nor access control.
//
// It is long because it is one decision table: TLS, ACL, cluster secret and
// what each requires of the others.
func (o *serveOptions) security(cfg *cluster.Config, logger *slog.Logger) (server.Options, error) {
	opts := server.Options{RateLimit: o.rateLimit, Profiling: o.pprof}
	tlsOn := o.tlsCert != "" || o.tlsKey != ""
	if tlsOn {
		if o.tlsCert == "" || o.tlsKey == "" || o.tlsCA == "" {
			return opts, errors.New("TLS needs --tls-cert, --tls-key and --tls-ca (the cluster CA, for mutual TLS between nodes)")
		}
		httpTLS, err := tlsutil.ServerConfig(o.tlsCert, o.tlsKey, o.tlsCA, o.tlsClientAuth)
		if err != nil {
			return opts, err
		}
		peerServer, peerClient, err := tlsutil.PeerConfig(o.tlsCert, o.tlsKey, o.tlsCA)
		if err != nil {
			return opts, err
		}
		opts.TLS, cfg.PeerTLSServer, cfg.PeerTLSClient = httpTLS, peerServer, peerClient
	}
	var storeOpts []acl.StoreOption
	if o.clusterSecret != "" {
		secret, err := readClusterSecret(o.clusterSecret, logger)
		if err != nil {
			return opts, err
		}
		cfg.ClusterSecret = secret
		storeOpts = append(storeOpts, acl.WithClusterSecret(secret))
	}
	if o.aclFile != "" {
		store, err := acl.Open(o.aclFile, storeOpts...)
		if err != nil {
			return opts, err
		}
		for _, w := range store.ACL().Warnings() {
			logger.Warn("acl file: "+w, "file", o.aclFile)
		}
		store.ReloadOnSignal(context.Background(), logger)
		opts.ACL = store
	}
	if o.aclFile != "" && !tlsOn && cfg.ClusterSecret == "" {
		// Members call each other's APIs to join, probe and remove; with
		// access control and no node certificates they need the secret.
		if len(cfg.Join) > 0 || len(cfg.InitialCluster) > 0 {
			return opts, errors.New("with --acl-file and no TLS, nodes need a credential of their own to join each other: " +
				"give every node the same --cluster-secret-file (openssl rand -hex 32 > cluster.secret), or run TLS (--tls-cert, --tls-key, --tls-ca)")
		}
		logger.Warn("--acl-file without TLS or --cluster-secret-file: no other node can join this one, and this one cannot re-register with a leader")
	}
	for _, h := range strings.Split(o.allowedHosts, ",") {
		if h = strings.TrimSpace(h); h == "" {
			continue
		}
		if !hostNamePattern.MatchString(h) {
			return opts, cli.Usagef("--allowed-hosts: %q is not a host name (no port, no scheme)", h)
		}
		opts.AllowedHosts = append(opts.AllowedHosts, h)
	}
	if len(opts.AllowedHosts) > 0 && opts.ACL != nil {
		logger.Warn("--allowed-hosts has no effect with --acl-file: a node with access control answers to any host name")
	}
	exposed := !isLoopback(o.httpAddr) || !isLoopback(o.raftAddr)
	switch {
	case !exposed || o.insecure:
	case !tlsOn:
		return opts, fmt.Errorf("refusing to serve %s / %s beyond loopback in plaintext: anyone on the network could join the Raft group or read lease secrets. "+
			"Set --tls-cert, --tls-key and --tls-ca (fencer tls init makes a dev CA), or pass --insecure", o.httpAddr, o.raftAddr)
	case o.aclFile == "" && !o.tlsClientAuth:
		return opts, errors.New("refusing to serve beyond loopback without access control: anyone could release locks or change membership. " +
			"Set --acl-file or --tls-client-auth, or pass --insecure")
	}
	return opts, nil
}

// hostNamePattern is a DNS name, as --allowed-hosts takes them.
var hostNamePattern = regexp.MustCompile(`^[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*\.?$`)

// checkAdvertise refuses an advertised address others could not dial.
func checkAdvertise(addr string) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil || host == "" || port == "" || port == "0" {
		return fmt.Errorf("--http-advertise-addr %q: want HOST:PORT with a host and a non-zero port, the address others dial", addr)
	}
	return nil
}

// readClusterSecret reads the cluster secret file, warning when others than
// its owner may read it.
func readClusterSecret(path string, logger *slog.Logger) (string, error) {
	secret, err := acl.ReadClusterSecret(path)
	if err != nil {
		return "", err
	}
	if st, err := os.Stat(path); err == nil && st.Mode().Perm()&0o077 != 0 {
		logger.Warn("the cluster secret file is readable by others: whoever reads it can join the cluster", "file", path, "mode", fmt.Sprintf("%#o", st.Mode().Perm()))
	}
	return secret, nil
}

// isLoopback reports whether a listen address stays on this machine.
func isLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

func (o *serveOptions) grantSettings() entry.GrantHistorySettings {
	return entry.GrantHistorySettings{PerLock: o.grantPerLock, Global: o.grantHistory}
}
