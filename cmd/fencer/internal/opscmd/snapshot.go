package opscmd

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/fencer-io/fencer/cmd/fencer/internal/cli"
	"github.com/fencer-io/fencer/fsm/entry"
	"github.com/fencer-io/fencer/fsm/snapshot"
)

type snapshotOptions struct {
	client   cli.ClientFlags
	minEpoch uint64
}

// NewSnapshotCmd returns "fencer snapshot": save, inspect and restore
// backups.
func NewSnapshotCmd() *cobra.Command {
	o := &snapshotOptions{}
	cmd := &cobra.Command{
		Use:   "snapshot",
		Short: "Back up and restore the cluster's state",
		Example: `  fencer snapshot save backup.snap
  fencer snapshot inspect backup.snap
  fencer snapshot restore backup.snap --endpoints 10.0.1.1:7001`,
	}
	o.client.Bind(cmd.PersistentFlags())
	save := &cobra.Command{
		Use:     "save FILE",
		Short:   "Save a consistent snapshot taken on the leader",
		Example: `  fencer snapshot save "backup-$(date +%F).snap"`,
		Args:    cli.Positional("FILE"),
		RunE:    func(cmd *cobra.Command, args []string) error { return o.save(cmd, args[0]) },
	}
	inspect := &cobra.Command{
		Use:   "inspect FILE",
		Short: "Print what a snapshot holds: locks, keys, highest token, index, term",
		Example: `  fencer snapshot inspect backup.snap
  fencer snapshot inspect backup.snap -o json | jq .header.last_token`,
		Args: cli.Positional("FILE"),
		RunE: func(cmd *cobra.Command, args []string) error { return o.inspect(cmd, args[0]) },
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
was taken, pass --min-epoch above the old cluster's epoch.

The epoch never passes 16777215, the last one whose tokens fit in 64 bits:
a restore that would move past it is refused (invalid_epoch), and so is a
backup whose epoch is 16777215 or more (invalid_snapshot). Each restore
moves the epoch at least one up, so keep --min-epoch small.`,
		Example: `  fencer snapshot restore backup.snap --endpoints 10.0.1.1:7001
  fencer snapshot restore backup.snap --min-epoch 3`,
		Args: cli.Positional("FILE"),
		RunE: func(cmd *cobra.Command, args []string) error { return o.restore(cmd, args[0]) },
	}
	restore.Flags().Uint64Var(&o.minEpoch, "min-epoch", 0, "raise the new epoch to at least this")
	return cli.Group(cmd, save, inspect, restore)
}

func (o *snapshotOptions) save(cmd *cobra.Command, path string) error {
	c, err := o.client.Client()
	if err != nil {
		return err
	}
	// CreateTemp makes the file 0600, whatever the umask: a backup holds
	// every lease secret. The rename keeps the mode.
	tmp, err := os.CreateTemp(filepath.Dir(path), ".fencer-snapshot-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	ctx, cancel := context.WithTimeout(cmd.Context(), o.client.Timeout+time.Minute)
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
	if o.client.JSON() {
		return cli.WriteJSON(cmd.OutOrStdout(), h)
	}
	fmt.Fprintf(cmd.OutOrStdout(), "saved %s: index %d, term %d, epoch %d, last token %d, %d locks, %d keys\n",
		path, h.AppliedIndex, h.Term, h.Epoch, h.LastToken, h.Locks, h.Keys)
	return nil
}

func readImage(path string) (*snapshot.Image, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	img, err := snapshot.ReadImage(f)
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
	if o.client.JSON() {
		return cli.WriteJSON(out, struct {
			Header snapshot.Header   `json:"header"`
			Locks  []entry.Lock      `json:"locks"`
			Keys   []entry.FencedKey `json:"keys"`
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
func redact(locks []entry.Lock) []entry.Lock {
	out := make([]entry.Lock, len(locks))
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
	img, err := snapshot.ReadImage(bytes.NewReader(data))
	if err == nil {
		err = snapshot.CheckBackupHeader(img.Header)
	}
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if o.minEpoch > entry.LastEpoch {
		return cli.Usagef("--min-epoch %d: the last epoch that issues tokens is %d", o.minEpoch, uint64(entry.LastEpoch))
	}
	c, err := o.client.Client()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(cmd.Context(), o.client.Timeout+2*time.Minute)
	defer cancel()
	h, err := c.SnapshotRestore(ctx, data, o.minEpoch)
	if err != nil {
		return err
	}
	if o.client.JSON() {
		return cli.WriteJSON(cmd.OutOrStdout(), h)
	}
	fmt.Fprintf(cmd.OutOrStdout(), "restored %s: epoch %d, %d keys; the next token will exceed %d, and fenced writes with tokens below it are refused\n", path, h.Epoch, h.Keys, h.Epoch<<entry.EpochShift)
	return nil
}
