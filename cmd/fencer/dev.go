package main

import (
	"fmt"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/fencer-io/fencer/cluster"
	"github.com/fencer-io/fencer/internal/gcfloor"
	"github.com/fencer-io/fencer/internal/server"
)

type devOptions struct {
	nodes    int
	dataDir  string
	httpBase int
	raftBase int
	host     string
	log      logFlags
}

func newDevCmd() *cobra.Command {
	o := &devOptions{}
	cmd := &cobra.Command{
		Use:   "dev",
		Short: "Run a local 3-node cluster in one process (real Raft over loopback TCP)",
		Args:  cobra.NoArgs,
		RunE:  func(cmd *cobra.Command, _ []string) error { return o.run(cmd) },
	}
	fs := cmd.Flags()
	fs.IntVar(&o.nodes, "nodes", 3, "number of nodes (3 or 5)")
	fs.StringVar(&o.dataDir, "data-dir", "", "keep data here (default: a temp dir removed on exit)")
	fs.IntVar(&o.httpBase, "http-port", 7001, "HTTP port of the first node; the others follow")
	fs.IntVar(&o.raftBase, "raft-port", 8001, "Raft port of the first node; the others follow")
	fs.StringVar(&o.host, "host", "127.0.0.1", "loopback address to bind")
	o.log.bind(fs)
	o.log.level = envOr("FENCER_LOG_LEVEL", "warn")
	return cmd
}

func (o *devOptions) run(cmd *cobra.Command) error {
	if o.nodes != 3 && o.nodes != 5 {
		return fmt.Errorf("--nodes %d: want 3 or 5", o.nodes)
	}
	logger, err := o.log.logger(cmd.ErrOrStderr())
	if err != nil {
		return err
	}
	gcfloor.Start(gcfloor.DefaultFloor)
	dir := o.dataDir
	if dir == "" {
		if dir, err = os.MkdirTemp("", "fencer-dev-"); err != nil {
			return err
		}
		defer os.RemoveAll(dir)
	}
	var peers []cluster.Peer
	for i := range o.nodes {
		peers = append(peers, cluster.Peer{
			ID:       "n" + strconv.Itoa(i+1),
			RaftAddr: net.JoinHostPort(o.host, strconv.Itoa(o.raftBase+i)),
			HTTPAddr: net.JoinHostPort(o.host, strconv.Itoa(o.httpBase+i)),
		})
	}
	var nodes []*server.Instance
	defer func() {
		for _, in := range nodes {
			in.Close()
		}
	}()
	for _, p := range peers {
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
	out := cmd.OutOrStdout()
	fmt.Fprintf(out, "fencer dev cluster: %d nodes, data in %s\n", o.nodes, dir)
	for _, p := range peers {
		fmt.Fprintf(out, "  %s  http://%s  raft %s\n", p.ID, p.HTTPAddr, p.RaftAddr)
	}
	if _, err := nodes[0].Node.WaitForLeader(15 * time.Second); err == nil {
		id, _ := nodes[0].Node.Leader()
		fmt.Fprintf(out, "leader: %s\n", id)
	}
	fmt.Fprintf(out, "\ntry:\n  curl -s -X POST http://%s/v1/locks/demo/acquire -d '{\"holder\":\"me\",\"ttl_ms\":30000}'\n", peers[0].HTTPAddr)
	fmt.Fprintln(out, "\nCtrl-C stops the cluster.")

	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	defer signal.Stop(sigs)
	<-sigs
	fmt.Fprintln(out, "stopping")
	return nil
}
