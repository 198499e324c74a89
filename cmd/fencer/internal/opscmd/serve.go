// Package opscmd holds the commands that run and operate a cluster: serve,
// members, cluster, snapshot, recover, migrate-log-store, tls, resource and
// bench. Each is
// an options struct whose flags are validated and then run.
package opscmd

import (
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/fencer-io/fencer/api"
	"github.com/fencer-io/fencer/cluster"
	"github.com/fencer-io/fencer/cluster/logstore"
	"github.com/fencer-io/fencer/cmd/fencer/internal/cli"
	"github.com/fencer-io/fencer/coord"
	"github.com/fencer-io/fencer/coord/events"
	"github.com/fencer-io/fencer/fsm/entry"
	"github.com/fencer-io/fencer/internal/gcfloor"
	"github.com/fencer-io/fencer/internal/limits"
	"github.com/fencer-io/fencer/internal/server"
)

// testConfig is set only in a build with a test tag (diskfault.go); no
// flag reaches it.
var testConfig func(*cluster.Config)

type serveOptions struct {
	id             string
	dataDir        string
	httpAddr       string
	httpAdvertise  string
	raftAddr       string
	bootstrap      bool
	join           string
	initialCluster string
	peerProxy      string
	peerProxyFile  string
	replace        bool
	nonVoter       bool
	snapThreshold  uint64
	trailingLogs   uint64
	electionTO     time.Duration
	stallTO        time.Duration
	logStore       string
	tlsCert        string
	tlsKey         string
	tlsCA          string
	tlsClientAuth  bool
	aclFile        string
	clusterSecret  string
	allowedHosts   string
	insecure       bool
	rateLimit      int
	maxLocks       int
	maxPerHolder   int
	maxWaiters     int
	maxPerLock     int
	maxSessions    int
	maxKVBytes     int64
	maxKeys        int
	maxKVBytesPer  int64
	eventHistory   int
	eventLag       int
	watch          api.WatchLimits
	grantHistory   int
	grantPerLock   int
	pprof          bool
	gcFloorMB      int
	log            cli.LogFlags
}

// NewServeCmd returns "fencer serve".
//
// It is long because it declares every flag of serve, with its environment
// variable, in one place.
func NewServeCmd() *cobra.Command {
	o := &serveOptions{}
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run one fencer node",
		Long: `Run one fencer node. Start a new cluster with --bootstrap on its first node,
add nodes with --join, or start several nodes at once with the same
--initial-cluster. A node restarted on the same data dir keeps its state and
rejoins by itself. Every flag can also be set by its environment variable.`,
		Example: `  # a new 3-node cluster, one node per machine
  fencer serve --id n1 --data-dir /var/lib/fencer --http-addr 10.0.0.1:7001 --raft-addr 10.0.0.1:8001 \
    --initial-cluster n1=10.0.0.1:8001@10.0.0.1:7001,n2=10.0.0.2:8001@10.0.0.2:7001,n3=10.0.0.3:8001@10.0.0.3:7001 \
    --tls-cert pki/n1.pem --tls-key pki/n1-key.pem --tls-ca pki/ca.pem --acl-file acl.json

  # one node on this machine, then a second that joins it
  fencer serve --id n1 --data-dir ./n1 --bootstrap
  fencer serve --id n2 --data-dir ./n2 --http-addr 127.0.0.1:7002 --raft-addr 127.0.0.1:8002 --join 127.0.0.1:7001`,
		Args: cli.Positional(),
		RunE: func(cmd *cobra.Command, _ []string) error { return o.run(cmd) },
	}
	fs := cmd.Flags()
	fs.StringVar(&o.id, "id", os.Getenv("FENCER_ID"), "node id, unique in the cluster ($FENCER_ID)")
	fs.StringVar(&o.dataDir, "data-dir", os.Getenv("FENCER_DATA_DIR"), "data directory ($FENCER_DATA_DIR)")
	fs.StringVar(&o.httpAddr, "http-addr", cli.EnvOr("FENCER_HTTP_ADDR", "127.0.0.1:7001"), "HTTP API address ($FENCER_HTTP_ADDR)")
	fs.StringVar(&o.httpAdvertise, "http-advertise-addr", os.Getenv("FENCER_HTTP_ADVERTISE_ADDR"),
		"HOST:PORT other nodes and clients are told to reach this node's API at, when it is not --http-addr (NAT, a proxy) ($FENCER_HTTP_ADVERTISE_ADDR)")
	fs.StringVar(&o.raftAddr, "raft-addr", cli.EnvOr("FENCER_RAFT_ADDR", "127.0.0.1:8001"), "Raft address ($FENCER_RAFT_ADDR)")
	fs.BoolVar(&o.bootstrap, "bootstrap", cli.EnvBool("FENCER_BOOTSTRAP"), "bootstrap a new cluster; a no-op when the data dir has state ($FENCER_BOOTSTRAP)")
	fs.StringVar(&o.join, "join", os.Getenv("FENCER_JOIN"), "HTTP addresses of members to join through, comma-separated ($FENCER_JOIN)")
	fs.StringVar(&o.initialCluster, "initial-cluster", os.Getenv("FENCER_INITIAL_CLUSTER"), "id=RAFT@HTTP,… for nodes started together ($FENCER_INITIAL_CLUSTER)")
	fs.BoolVar(&o.replace, "replace", cli.EnvBool("FENCER_REPLACE"), "take back this id after the data dir was wiped: the leader removes the old incarnation first ($FENCER_REPLACE)")
	fs.BoolVar(&o.nonVoter, "non-voter", cli.EnvBool("FENCER_NON_VOTER"), "join as a non-voting member ($FENCER_NON_VOTER)")
	fs.StringVar(&o.peerProxy, "peer-proxy", os.Getenv("FENCER_PEER_PROXY"), "id=HOST:PORT,… dial these addresses to reach peers (fault-injection proxies) ($FENCER_PEER_PROXY)")
	fs.Uint64Var(&o.snapThreshold, "snapshot-threshold", cli.EnvUint("FENCER_SNAPSHOT_THRESHOLD", 8192), "take a snapshot after this many new log entries ($FENCER_SNAPSHOT_THRESHOLD)")
	fs.Uint64Var(&o.trailingLogs, "trailing-logs", cli.EnvUint("FENCER_TRAILING_LOGS", 10240), "log entries kept behind a snapshot for slow followers ($FENCER_TRAILING_LOGS)")
	fs.DurationVar(&o.electionTO, "election-timeout", cli.EnvDuration("FENCER_ELECTION_TIMEOUT", cluster.DefaultElectionTimeout),
		"Raft heartbeat, election and leader-lease timeout: a crashed leader is replaced after one to three of them; raise it on a slow network ($FENCER_ELECTION_TIMEOUT)")
	fs.DurationVar(&o.stallTO, "stall-timeout", cli.EnvDuration("FENCER_STALL_TIMEOUT", 5*time.Second),
		"a leader whose log store has not completed a write for this long cuts itself off and exits non-zero, so that another member leads ($FENCER_STALL_TIMEOUT)")
	fs.StringVar(&o.logStore, "log-store", cli.EnvOr("FENCER_LOG_STORE", string(logstore.Default)),
		"Raft log store of a new data dir: bolt, or wal (one fsync per write instead of two); an existing dir must hold this kind (fencer migrate-log-store converts one) ($FENCER_LOG_STORE)")
	fs.StringVar(&o.peerProxyFile, "peer-proxy-file", os.Getenv("FENCER_PEER_PROXY_FILE"), "file with id=HOST:PORT lines, re-read when it changes ($FENCER_PEER_PROXY_FILE)")
	fs.StringVar(&o.tlsCert, "tls-cert", os.Getenv("FENCER_TLS_CERT"), "this node's certificate: TLS on the API and mutual TLS between nodes ($FENCER_TLS_CERT)")
	fs.StringVar(&o.tlsKey, "tls-key", os.Getenv("FENCER_TLS_KEY"), "this node's key ($FENCER_TLS_KEY)")
	fs.StringVar(&o.tlsCA, "tls-ca", os.Getenv("FENCER_TLS_CA"), "the cluster CA: verifies peers, and client certificates when given ($FENCER_TLS_CA)")
	fs.BoolVar(&o.tlsClientAuth, "tls-client-auth", cli.EnvBool("FENCER_TLS_CLIENT_AUTH"), "require a client certificate from the CA on the API ($FENCER_TLS_CLIENT_AUTH)")
	fs.StringVar(&o.aclFile, "acl-file", os.Getenv("FENCER_ACL_FILE"), "bearer tokens with roles and prefixes; reloaded on SIGHUP ($FENCER_ACL_FILE)")
	fs.StringVar(&o.allowedHosts, "allowed-hosts", os.Getenv("FENCER_ALLOWED_HOSTS"),
		"without --acl-file, host names besides localhost and the cluster's own that requests may name in Host, comma-separated ($FENCER_ALLOWED_HOSTS)")
	fs.StringVar(&o.clusterSecret, "cluster-secret-file", os.Getenv("FENCER_CLUSTER_SECRET_FILE"),
		"the members' own credential without TLS: the same secret file on every node, needed with --acl-file to join ($FENCER_CLUSTER_SECRET_FILE)")
	fs.BoolVar(&o.insecure, "insecure", cli.EnvBool("FENCER_INSECURE"), "allow a non-loopback address without TLS or access control ($FENCER_INSECURE)")
	fs.IntVar(&o.rateLimit, "rate-limit", int(cli.EnvUint("FENCER_RATE_LIMIT", 10000)), "requests per second per client (ACL principal or IP); 0 disables ($FENCER_RATE_LIMIT)")
	fs.IntVar(&o.maxLocks, "max-locks", int(cli.EnvUint("FENCER_MAX_LOCKS", 1_000_000)), "held locks and semaphore permits in total ($FENCER_MAX_LOCKS)")
	fs.IntVar(&o.maxPerHolder, "max-locks-per-holder", int(cli.EnvUint("FENCER_MAX_LOCKS_PER_HOLDER", 100_000)), "held locks and semaphore permits per holder name ($FENCER_MAX_LOCKS_PER_HOLDER)")
	fs.IntVar(&o.maxWaiters, "max-waiters", int(cli.EnvUint("FENCER_MAX_WAITERS", 100_000)), "queued acquires in total ($FENCER_MAX_WAITERS)")
	fs.IntVar(&o.maxPerLock, "max-waiters-per-lock", int(cli.EnvUint("FENCER_MAX_WAITERS_PER_LOCK", 1024)), "queued acquires per lock ($FENCER_MAX_WAITERS_PER_LOCK)")
	fs.IntVar(&o.maxSessions, "max-sessions", int(cli.EnvUint("FENCER_MAX_SESSIONS", 100_000)), "open sessions the leader times, refused 429 too_many_locks past it ($FENCER_MAX_SESSIONS)")
	fs.Int64Var(&o.maxKVBytes, "max-kv-bytes", int64(cli.EnvUint("FENCER_MAX_KV_BYTES", coord.DefaultMaxKVBytes)),
		"value bytes in the fenced key-value store, in total; a put past it is 429 kv_full ($FENCER_MAX_KV_BYTES)")
	fs.IntVar(&o.maxKeys, "max-keys", int(cli.EnvUint("FENCER_MAX_KEYS", 1_000_000)), "keys in the fenced key-value store ($FENCER_MAX_KEYS)")
	fs.Int64Var(&o.maxKVBytesPer, "max-kv-bytes-per-principal", int64(cli.EnvUint("FENCER_MAX_KV_BYTES_PER_PRINCIPAL", coord.DefaultMaxKVBytesPerPrincipal)),
		"value bytes last written by one ACL principal (with --acl-file); a quarter of the default total, so no one token fills the store ($FENCER_MAX_KV_BYTES_PER_PRINCIPAL)")
	fs.IntVar(&o.eventHistory, "event-history", int(cli.EnvUint("FENCER_EVENT_HISTORY", events.DefaultHistory)),
		"log entries whose events this node keeps in memory for GET /v1/events ($FENCER_EVENT_HISTORY)")
	fs.IntVar(&o.eventLag, "event-stream-lag", int(cli.EnvUint("FENCER_EVENT_STREAM_LAG", events.DefaultLag)),
		"events an event stream may fall behind (counted from where it started or last caught up) before it ends with a lagged event naming where to resume; costs no memory ($FENCER_EVENT_STREAM_LAG)")
	fs.IntVar(&o.watch.Streams, "max-event-streams", int(cli.EnvUint("FENCER_MAX_EVENT_STREAMS", limits.DefaultMaxStreams)),
		"event streams open on this node; past it 429 too_many_watches ($FENCER_MAX_EVENT_STREAMS)")
	fs.IntVar(&o.watch.StreamsPerClient, "max-event-streams-per-principal", int(cli.EnvUint("FENCER_MAX_EVENT_STREAMS_PER_PRINCIPAL", limits.DefaultMaxStreamsPerClient)),
		"event streams open on this node per ACL principal (per client IP without --acl-file) ($FENCER_MAX_EVENT_STREAMS_PER_PRINCIPAL)")
	fs.IntVar(&o.watch.BlockingReads, "max-blocking-reads", int(cli.EnvUint("FENCER_MAX_BLOCKING_READS", limits.DefaultMaxBlockingReads)),
		"blocking reads (wait_index) in progress on this node; past it 429 too_many_watches ($FENCER_MAX_BLOCKING_READS)")
	fs.IntVar(&o.watch.BlockingReadsPerClient, "max-blocking-reads-per-principal", int(cli.EnvUint("FENCER_MAX_BLOCKING_READS_PER_PRINCIPAL", limits.DefaultMaxBlockingReadsPerClient)),
		"blocking reads in progress on this node per ACL principal (per client IP without --acl-file) ($FENCER_MAX_BLOCKING_READS_PER_PRINCIPAL)")
	fs.IntVar(&o.grantHistory, "grant-history", int(cli.EnvUint("FENCER_GRANT_HISTORY", entry.DefaultGrantHistory)),
		"grants the cluster keeps for GET /v1/tokens/{token}, and locks that keep a history; 0 keeps none. Fixed when the cluster first keeps a history: a node whose value differs logs a warning and follows the cluster's ($FENCER_GRANT_HISTORY)")
	fs.IntVar(&o.grantPerLock, "grant-history-per-lock", int(cli.EnvUint("FENCER_GRANT_HISTORY_PER_LOCK", entry.DefaultGrantHistoryPerLock)),
		"grants each lock keeps for GET /v1/locks/{name}/history; fixed with --grant-history ($FENCER_GRANT_HISTORY_PER_LOCK)")
	fs.BoolVar(&o.pprof, "pprof", cli.EnvBool("FENCER_PPROF"), "serve Go profiles on /debug/pprof/ ($FENCER_PPROF)")
	fs.IntVar(&o.gcFloorMB, "gc-heap-floor-mb", int(cli.EnvUint("FENCER_GC_HEAP_FLOOR_MB", gcfloor.DefaultFloor>>20)),
		"MiB of heap below which Go's garbage collector does not run; 0 leaves GOGC alone; an explicit GOGC wins ($FENCER_GC_HEAP_FLOOR_MB)")
	o.log.Bind(fs)
	return cmd
}

func (o *serveOptions) run(cmd *cobra.Command) error {
	logger, err := o.log.Logger(cmd.ErrOrStderr())
	if err != nil {
		return err
	}
	cfg, err := o.config()
	if err != nil {
		return err
	}
	cfg.Logger = logger
	if testConfig != nil {
		testConfig(&cfg)
	}
	opts, err := o.security(&cfg, logger)
	if err != nil {
		return err
	}
	opts.Coord = coord.Config{
		MaxLocks:          o.maxLocks,
		MaxLocksPerHolder: o.maxPerHolder,
		MaxWaiters:        o.maxWaiters,
		MaxWaitersPerLock: o.maxPerLock,
		MaxSessions:       o.maxSessions,

		MaxKVBytes:             o.maxKVBytes,
		MaxKeys:                o.maxKeys,
		MaxKVBytesPerPrincipal: o.maxKVBytesPer,
	}
	opts.Events = events.Config{History: o.eventHistory, Lag: o.eventLag}
	opts.Watch = o.watch
	grants := o.grantSettings()
	opts.Coord.GrantHistory = &grants
	if o.gcFloorMB > 0 {
		gcfloor.Start(uint64(o.gcFloorMB) << 20)
	}
	if o.httpAdvertise == "" && strings.HasSuffix(o.httpAddr, ":0") {
		cfg.HTTPAddr = "" // advertise the port actually bound
	}
	in, err := server.Start(cfg, o.httpAddr, opts)
	if err != nil {
		return err
	}
	logger.Info("fencer node started", "id", cfg.ID, "http", in.Addr(), "raft", in.Node.RaftAddr(), "data_dir", cfg.DataDir)

	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	defer signal.Stop(sigs)
	select {
	case sig := <-sigs:
		// A leader hands its leadership over first, so that a rolling
		// restart costs clients no election.
		logger.Info("shutting down", "signal", sig.String())
		return in.Stop()
	case err := <-in.Node.Fatal():
		closeWithin(in, fatalCloseTimeout, logger)
		return err
	case err := <-in.Done():
		in.Close()
		return fmt.Errorf("http server: %w", err)
	}
}

// fatalCloseTimeout bounds the stop after a fatal error: a node whose disk
// hangs cannot finish stopping Raft (it waits for the stuck write), and
// must exit anyway so that its supervisor restarts it.
const fatalCloseTimeout = 5 * time.Second

// closeWithin closes the instance, or gives up waiting after d.
func closeWithin(in *server.Instance, d time.Duration, logger *slog.Logger) {
	done := make(chan struct{})
	go func() {
		in.Close()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(d):
		logger.Error("the node did not stop within the time allowed; exiting anyway (its data is crash-safe)", "waited", d)
	}
}
