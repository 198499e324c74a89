// Package devcmd is "fencer dev": a local cluster of real nodes in one
// process, its data dir (kept between runs, locked, tied to its layout) and
// its orderly stop.
package devcmd

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/fencer-io/fencer/cluster"
	"github.com/fencer-io/fencer/cmd/fencer/internal/cli"
	"github.com/fencer-io/fencer/internal/gcfloor"
	"github.com/fencer-io/fencer/internal/server"
)

// devLayoutFile records, in a dev data dir, the layout the cluster was made
// with: restarted with other ports or another node count, its Raft
// configuration would name members that are not there.
const devLayoutFile = "dev.json"

// errInterrupted is returned when a signal stops the cluster before it is up.
var errInterrupted = errors.New("interrupted while starting; stopped")

type devOptions struct {
	layout    devLayout
	dataDir   string
	ephemeral bool
	log       cli.LogFlags
}

// devLayout is what a dev cluster's data dir must be started with again.
type devLayout struct {
	Nodes    int    `json:"nodes"`
	Host     string `json:"host"`
	HTTPPort int    `json:"http_port"`
	RaftPort int    `json:"raft_port"`
}

// NewDevCmd returns "fencer dev".
func NewDevCmd() *cobra.Command {
	o := &devOptions{}
	cmd := &cobra.Command{
		Use:   "dev",
		Short: "Run a local 3-node cluster in one process (real Raft over loopback TCP)",
		Long: `Run a local cluster in one process: real Raft over loopback TCP, every node
serving the HTTP API. Ctrl-C or SIGTERM stops it.

The cluster keeps its state between runs, so its tokens keep increasing as
they would in production: by default in $XDG_STATE_HOME/fencer/dev
(~/.local/state/fencer/dev). --data-dir keeps it elsewhere; --ephemeral uses
a temporary directory that is removed when the cluster stops.`,
		Example: `  fencer dev                          # 3 nodes on 127.0.0.1:7001-7003, state kept
  fencer dev --ephemeral              # a throwaway cluster, removed when it stops
  fencer dev --data-dir ./dev-state   # state kept here instead
  fencer dev --nodes 5 --http-port 9001 --raft-port 9101 --ephemeral`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return o.run(cmd) },
	}
	fs := cmd.Flags()
	fs.IntVar(&o.layout.Nodes, "nodes", 3, "number of nodes (3 or 5)")
	fs.StringVar(&o.dataDir, "data-dir", "", "keep the cluster's state here (default $XDG_STATE_HOME/fencer/dev)")
	fs.BoolVar(&o.ephemeral, "ephemeral", false, "keep the state in a temporary directory removed on exit")
	fs.IntVar(&o.layout.HTTPPort, "http-port", 7001, "HTTP port of the first node; the others follow")
	fs.IntVar(&o.layout.RaftPort, "raft-port", 8001, "Raft port of the first node; the others follow")
	fs.StringVar(&o.layout.Host, "host", "127.0.0.1", "loopback address to bind")
	o.log.Bind(fs)
	o.log.Level = cli.EnvOr("FENCER_LOG_LEVEL", "warn")
	return cmd
}

func (o *devOptions) validate() error {
	if o.layout.Nodes != 3 && o.layout.Nodes != 5 {
		return fmt.Errorf("--nodes %d: want 3 or 5", o.layout.Nodes)
	}
	if o.ephemeral && o.dataDir != "" {
		return errors.New("--ephemeral and --data-dir exclude each other: a throwaway cluster, or one kept in DIR")
	}
	return nil
}

// peers returns the members of the layout: n1, n2, … on consecutive ports.
func (l devLayout) peers() []cluster.Peer {
	var peers []cluster.Peer
	for i := range l.Nodes {
		peers = append(peers, cluster.Peer{
			ID:       "n" + strconv.Itoa(i+1),
			RaftAddr: net.JoinHostPort(l.Host, strconv.Itoa(l.RaftPort+i)),
			HTTPAddr: net.JoinHostPort(l.Host, strconv.Itoa(l.HTTPPort+i)),
		})
	}
	return peers
}

func (l devLayout) flags() string {
	return fmt.Sprintf("--nodes %d --host %s --http-port %d --raft-port %d", l.Nodes, l.Host, l.HTTPPort, l.RaftPort)
}

// It is long because it is the dev cluster's life in order: start every node,
// wait, serve, stop.
func (o *devOptions) run(cmd *cobra.Command) error {
	// Signals first: a Ctrl-C at any later point must reach the cleanup
	// below. This also re-enables SIGINT when the shell started us with it
	// ignored (a background job of a script), as os/signal documents.
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	defer signal.Stop(sigs)

	if err := o.validate(); err != nil {
		return err
	}
	// Before the data dir: a second `make run` holds both, and only the
	// ports say what a second cluster beside it needs.
	if err := o.layout.checkPorts(); err != nil {
		return err
	}
	logger, err := o.log.Logger(cmd.ErrOrStderr())
	if err != nil {
		return err
	}
	out := cmd.OutOrStdout()
	dir, release, err := o.prepareDir()
	if err != nil {
		return err
	}
	defer release()
	if o.ephemeral {
		fmt.Fprintf(out, "fencer dev: %d nodes, state in %s (removed on exit)\n", o.layout.Nodes, dir)
	} else {
		fmt.Fprintf(out, "fencer dev: %d nodes, state kept in %s (--ephemeral for a throwaway cluster)\n", o.layout.Nodes, dir)
	}
	gcfloor.Start(gcfloor.DefaultFloor)

	peers := o.layout.peers()
	var nodes []*server.Instance
	defer func() { stopDev(nodes) }()
	for _, p := range peers {
		if interrupted(sigs) {
			return errInterrupted
		}
		in, err := server.Start(cluster.Config{
			ID:             p.ID,
			DataDir:        filepath.Join(dir, p.ID),
			RaftAddr:       p.RaftAddr,
			HTTPAddr:       p.HTTPAddr,
			InitialCluster: peers,
			Logger:         logger,
		}, p.HTTPAddr)
		if err != nil {
			return fmt.Errorf("start %s: %w", p.ID, err)
		}
		nodes = append(nodes, in)
	}
	for _, p := range peers {
		fmt.Fprintf(out, "  %s  http://%s  raft %s\n", p.ID, p.HTTPAddr, p.RaftAddr)
	}
	leader, err := waitDevLeader(nodes[0], sigs, 15*time.Second)
	if err != nil {
		return err
	}
	if leader != "" {
		fmt.Fprintf(out, "leader: %s\n", leader)
	}
	fmt.Fprintf(out, "\ntry:\n  curl -sS http://%s/v1/locks/demo/acquire --json '{\"holder\":\"me\",\"ttl_ms\":30000}'\n", peers[0].HTTPAddr)
	fmt.Fprintln(out, "\nCtrl-C stops the cluster.")
	<-sigs
	fmt.Fprintln(out, "stopping")
	// A second signal while stopping exits at once.
	go func() {
		<-sigs
		fmt.Fprintf(cmd.ErrOrStderr(), "fencer dev: stopped without waiting; state in %s\n", dir)
		os.Exit(130)
	}()
	return nil
}

// interrupted reports whether a stop signal has arrived, without waiting.
func interrupted(sigs <-chan os.Signal) bool {
	select {
	case <-sigs:
		return true
	default:
		return false
	}
}

// waitDevLeader waits until a leader is known, a signal arrives (an error)
// or the timeout passes (no leader is not an error: the nodes keep trying).
func waitDevLeader(in *server.Instance, sigs <-chan os.Signal, timeout time.Duration) (string, error) {
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(timeout)
	for {
		if id, _ := in.Node.Leader(); id != "" {
			return id, nil
		}
		select {
		case <-sigs:
			return "", errInterrupted
		case <-deadline:
			return "", nil
		case <-tick.C:
		}
	}
}

// prepareDir returns the data dir, locked for this process and checked
// against its recorded layout, and the function that unlocks it (and, for
// an ephemeral cluster, removes it).
func (o *devOptions) prepareDir() (string, func(), error) {
	if o.ephemeral {
		dir, err := os.MkdirTemp("", "fencer-dev-")
		if err != nil {
			return "", nil, err
		}
		return dir, func() { os.RemoveAll(dir) }, nil
	}
	dir := o.dataDir
	if dir == "" {
		var err error
		if dir, err = defaultDevDir(); err != nil {
			return "", nil, err
		}
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", nil, fmt.Errorf("dev data dir: %w", err)
	}
	unlock, err := lockDevDir(dir)
	if err != nil {
		return "", nil, err
	}
	if err := checkLayout(dir, o.layout); err != nil {
		unlock()
		return "", nil, err
	}
	return dir, unlock, nil
}

// defaultDevDir is $XDG_STATE_HOME/fencer/dev, or ~/.local/state/fencer/dev.
func defaultDevDir() (string, error) {
	if state := os.Getenv("XDG_STATE_HOME"); filepath.IsAbs(state) {
		return filepath.Join(state, "fencer", "dev"), nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("no home directory to keep the dev cluster's state in (%v): pass --data-dir DIR or --ephemeral", err)
	}
	return filepath.Join(home, ".local", "state", "fencer", "dev"), nil
}

// lockDevDir takes an exclusive lock on dir, so that a second dev cluster
// on the same state is refused instead of waiting on its stores' locks.
func lockDevDir(dir string) (func(), error) {
	f, err := os.OpenFile(filepath.Join(dir, "dev.lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("dev data dir: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		return nil, fmt.Errorf("another fencer dev is running on %s: stop it, or start another cluster beside it "+
			"with --ephemeral (or --data-dir DIR) and ports of its own (--http-port, --raft-port)", dir)
	}
	return func() { f.Close() }, nil
}

// checkLayout records want in dir, or refuses it when dir was made with
// another layout.
func checkLayout(dir string, want devLayout) error {
	path := filepath.Join(dir, devLayoutFile)
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		data, _ = json.Marshal(want)
		return os.WriteFile(path, append(data, '\n'), 0o600)
	}
	if err != nil {
		return fmt.Errorf("dev data dir: %w", err)
	}
	var had devLayout
	if err := json.Unmarshal(data, &had); err != nil {
		return fmt.Errorf("%s: %w (delete %s to start over)", path, err, dir)
	}
	if had != want {
		return fmt.Errorf("%s holds a dev cluster made with %s; start it with the same flags, "+
			"or pass --data-dir DIR or --ephemeral for another cluster, or delete %s to start over", dir, had.flags(), dir)
	}
	return nil
}

// stopDev stops the HTTP side of every node, then Raft on the leader, then
// on the followers. In the other order the leader, still running, would
// retry the stopped followers and log every failed appendEntries.
func stopDev(nodes []*server.Instance) {
	parallel := func(nodes []*server.Instance, f func(*server.Instance)) {
		var wg sync.WaitGroup
		for _, in := range nodes {
			wg.Go(func() { f(in) })
		}
		wg.Wait()
	}
	parallel(nodes, func(in *server.Instance) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		in.HTTP.Shutdown(ctx)
	})
	var followers []*server.Instance
	for _, in := range nodes {
		if in.Node.IsLeader() {
			in.Node.Close()
		} else {
			followers = append(followers, in)
		}
	}
	parallel(followers, func(in *server.Instance) { in.Node.Close() })
}
