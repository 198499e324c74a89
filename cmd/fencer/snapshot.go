package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/fencer-io/fencer/cluster"
	"github.com/fencer-io/fencer/fsm"
)

func init() { extraCommands = append(extraCommands, newSnapshotCmd, newRecoverCmd) }

type snapshotOptions struct {
	client   clientFlags
	minEpoch uint64
}

// newSnapshotCmd returns "fencer snapshot": save, inspect and restore
// backups.
func newSnapshotCmd() *cobra.Command {
	o := &snapshotOptions{}
	cmd := &cobra.Command{Use: "snapshot", Short: "Back up and restore the cluster's state"}
	o.client.bind(cmd.PersistentFlags())
	save := &cobra.Command{
		Use:   "save FILE",
		Short: "Save a consistent snapshot taken on the leader",
		Args:  cobra.ExactArgs(1),
		RunE:  func(cmd *cobra.Command, args []string) error { return o.save(cmd, args[0]) },
	}
	inspect := &cobra.Command{
		Use:   "inspect FILE",
		Short: "Print what a snapshot holds: locks, keys, highest token, index, term",
		Args:  cobra.ExactArgs(1),
		RunE:  func(cmd *cobra.Command, args []string) error { return o.inspect(cmd, args[0]) },
	}
	restore := &cobra.Command{
		Use:   "restore FILE",
		Short: "Restore a backup into a (fresh) cluster; every later token exceeds every old one",
		Long: `Restore a backup into a running cluster, usually a fresh one.

The token epoch becomes max(backup epoch+1, cluster epoch+1, --min-epoch), so
every token issued afterwards exceeds every token the old cluster ever issued,
even those issued after the backup was taken. Fenced keys keep their last
tokens. Held locks are dropped: their grants belong to the old cluster.
If the old cluster had itself been restored or recovered after this backup
was taken, pass --min-epoch above the old cluster's epoch.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error { return o.restore(cmd, args[0]) },
	}
	restore.Flags().Uint64Var(&o.minEpoch, "min-epoch", 0, "raise the new epoch to at least this")
	cmd.AddCommand(save, inspect, restore)
	return cmd
}

func (o *snapshotOptions) save(cmd *cobra.Command, path string) error {
	c, err := o.client.client()
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".fencer-snapshot-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	ctx, cancel := context.WithTimeout(cmd.Context(), o.client.timeout+time.Minute)
	defer cancel()
	h, err := c.SnapshotSave(ctx, tmp)
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return err
	}
	if o.client.json() {
		return writeJSON(cmd.OutOrStdout(), h)
	}
	fmt.Fprintf(cmd.OutOrStdout(), "saved %s: index %d, term %d, epoch %d, last token %d, %d locks, %d keys\n",
		path, h.AppliedIndex, h.Term, h.Epoch, h.LastToken, h.Locks, h.Keys)
	return nil
}

func readImage(path string) (*fsm.Image, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	img, err := fsm.ReadImage(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return img, nil
}

func (o *snapshotOptions) inspect(cmd *cobra.Command, path string) error {
	img, err := readImage(path)
	if err != nil {
		return err
	}
	out := cmd.OutOrStdout()
	if o.client.json() {
		return writeJSON(out, struct {
			Header fsm.Header      `json:"header"`
			Locks  []fsm.Lock      `json:"locks"`
			Keys   []fsm.FencedKey `json:"keys"`
		}{img.Header, redact(img.Locks), img.Keys})
	}
	h := img.Header
	fmt.Fprintf(out, "cluster %s  index %d  term %d  epoch %d  highest token %d\n", h.ClusterID, h.AppliedIndex, h.Term, h.Epoch, h.LastToken)
	fmt.Fprintf(out, "%d locks, %d keys, %d members, %d remembered request ids\n", h.Locks, h.Keys, h.Members, h.Requests)
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	if len(img.Locks) > 0 {
		fmt.Fprintln(tw, "\nLOCK\tHOLDER\tTOKEN\tTTL")
		for _, l := range img.Locks {
			fmt.Fprintf(tw, "%s\t%s\t%d\t%v\n", l.Name, l.Holder, l.Token, time.Duration(l.TTLMillis)*time.Millisecond)
		}
	}
	if len(img.Keys) > 0 {
		fmt.Fprintln(tw, "\nKEY\tLAST TOKEN\tBYTES")
		for _, k := range img.Keys {
			fmt.Fprintf(tw, "%s\t%d\t%d\n", k.Key, k.Token, len(k.Value))
		}
	}
	return tw.Flush()
}

// redact drops lease secrets from locks that are about to be printed.
func redact(locks []fsm.Lock) []fsm.Lock {
	out := make([]fsm.Lock, len(locks))
	for i, l := range locks {
		l.Lease = ""
		out[i] = l
	}
	return out
}

func (o *snapshotOptions) restore(cmd *cobra.Command, path string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if _, err := fsm.ReadImage(bytes.NewReader(data)); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	c, err := o.client.client()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(cmd.Context(), o.client.timeout+2*time.Minute)
	defer cancel()
	h, err := c.SnapshotRestore(ctx, data, o.minEpoch)
	if err != nil {
		return err
	}
	if o.client.json() {
		return writeJSON(cmd.OutOrStdout(), h)
	}
	fmt.Fprintf(cmd.OutOrStdout(), "restored %s: epoch %d, %d keys; the next token will exceed %d\n", path, h.Epoch, h.Keys, h.Epoch<<fsm.EpochShift)
	return nil
}

type recoverOptions struct {
	id      string
	dataDir string
	members string
	bump    uint64
	log     logFlags
}

// newRecoverCmd returns "fencer recover": rebuild a cluster that lost its
// quorum for good from its survivors.
func newRecoverCmd() *cobra.Command {
	o := &recoverOptions{}
	cmd := &cobra.Command{
		Use:   "recover --id ID --data-dir DIR --members n1=RAFT@HTTP,…",
		Short: "Force a new membership on a stopped survivor after a permanent loss of quorum",
		Long: `Rewrite a STOPPED node's data dir so that it starts as a member of the given
membership, after the cluster lost its quorum for good (e.g. 2 of 3 nodes are
gone). Run it on every survivor with the same --members list, then start the
survivors normally (fencer serve with the same --id and --data-dir).

The token epoch is bumped (--epoch-bump, default 1): the lost members may
have committed grants that no survivor has seen, and every later token must
exceed them. Held locks are voided for the same reason. Entries that only the
lost members had are gone; that is the price of forcing a quorum.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return o.run(cmd) },
	}
	cmd.Flags().StringVar(&o.id, "id", os.Getenv("FENCER_ID"), "this node's id ($FENCER_ID)")
	cmd.Flags().StringVar(&o.dataDir, "data-dir", os.Getenv("FENCER_DATA_DIR"), "this node's data dir ($FENCER_DATA_DIR)")
	cmd.Flags().StringVar(&o.members, "members", "", "the surviving members, id=RAFT_ADDR@HTTP_ADDR,…")
	cmd.Flags().Uint64Var(&o.bump, "epoch-bump", 1, "how far to move the token epoch")
	o.log.bind(cmd.Flags())
	return cmd
}

func (o *recoverOptions) run(cmd *cobra.Command) error {
	if o.id == "" || o.dataDir == "" || o.members == "" {
		return fmt.Errorf("--id, --data-dir and --members are required")
	}
	peers, err := cluster.ParseInitialCluster(o.members)
	if err != nil {
		return err
	}
	logger, err := o.log.logger(cmd.ErrOrStderr())
	if err != nil {
		return err
	}
	logger.Info("forced recovery requested", "node", o.id, "members", o.members, "by", os.Getenv("USER"))
	h, err := cluster.Recover(cluster.RecoverOptions{DataDir: o.dataDir, ID: o.id, Members: peers, EpochBump: o.bump, Logger: logger})
	if err != nil {
		return err
	}
	fmt.Fprintf(cmd.OutOrStdout(), "recovered %s: %d members, epoch %d, highest token so far %d; start the node now\n", o.id, len(peers), h.Epoch, h.LastToken)
	return nil
}
