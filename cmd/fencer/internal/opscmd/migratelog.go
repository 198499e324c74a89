package opscmd

import (
	"fmt"
	"os"

	"github.com/hashicorp/go-hclog"
	"github.com/spf13/cobra"

	"github.com/fencer-io/fencer/cluster/logstore"
	"github.com/fencer-io/fencer/cmd/fencer/internal/cli"
)

// migrateLogOptions are the flags of "fencer migrate-log-store".
type migrateLogOptions struct {
	dataDir string
	to      string
}

// NewMigrateLogCmd returns "fencer migrate-log-store": convert a stopped
// node's data dir from one kind of log store to the other.
func NewMigrateLogCmd() *cobra.Command {
	o := &migrateLogOptions{}
	cmd := &cobra.Command{
		Use:   "migrate-log-store --data-dir DIR --to wal|bolt",
		Short: "Convert a stopped node's Raft log store to bolt or wal",
		Long: `Convert a STOPPED node's data dir to the other kind of Raft log store (bolt,
the default, or wal). It copies every log entry and Raft's term and vote into
a new store beside the old one, reads both back and compares them, moves the
new store into place, and only then records the new kind in node.json: a
crash at any point leaves the dir on one kind, whole, and running the command
again completes it. Snapshots are kept as they are.

A running node holds its data dir, and is refused. Then start the node with
--log-store set to the new kind. In a cluster, convert one member at a time:
stop it, convert it, start it, wait for /readyz. Members of both kinds work
together.`,
		Example: `  # on n2, with the node stopped
  fencer migrate-log-store --data-dir /var/lib/fencer --to wal
  fencer serve --id n2 --data-dir /var/lib/fencer --log-store wal ...`,
		Args: cli.Positional(),
		RunE: func(cmd *cobra.Command, _ []string) error { return o.run(cmd) },
	}
	cmd.Flags().StringVar(&o.dataDir, "data-dir", os.Getenv("FENCER_DATA_DIR"), "the stopped node's data dir ($FENCER_DATA_DIR)")
	cmd.Flags().StringVar(&o.to, "to", "", "the kind of log store to convert to: wal or bolt")
	return cmd
}

func (o *migrateLogOptions) run(cmd *cobra.Command) error {
	if o.dataDir == "" || o.to == "" {
		return cli.Usagef("--data-dir and --to are required")
	}
	to, err := logstore.ParseKind(o.to)
	if err != nil {
		return cli.Usagef("--to %q: want wal or bolt", o.to)
	}
	logger := hclog.New(&hclog.LoggerOptions{Name: "migrate-log-store", Level: hclog.Info, Output: cmd.ErrOrStderr()})
	res, err := logstore.Migrate(o.dataDir, to, logger)
	if err != nil {
		return err
	}
	out := cmd.OutOrStdout()
	switch {
	case !res.Changed:
		fmt.Fprintf(out, "%s already holds a %s log store; nothing to do\n", o.dataDir, to)
	case res.From == "":
		fmt.Fprintf(out, "%s holds no log store yet: it records %s, which the node creates when it starts\n", o.dataDir, to)
	default:
		n := uint64(0)
		if res.Last > 0 {
			n = res.Last - res.First + 1
		}
		fmt.Fprintf(out, "converted %s from %s to %s: %d entries (%d..%d) and %d stable keys copied and compared; snapshots kept.\n"+
			"Start the node with --log-store %s\n", o.dataDir, res.From, to, n, res.First, res.Last, res.StableKeys, to)
	}
	return nil
}
