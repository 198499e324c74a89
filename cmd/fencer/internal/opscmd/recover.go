package opscmd

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/fencer-io/fencer/cluster"
	"github.com/fencer-io/fencer/cluster/recovery"
	"github.com/fencer-io/fencer/cmd/fencer/internal/cli"
)

// recoverOptions are the flags of "fencer recover".
type recoverOptions struct {
	id      string
	dataDir string
	members string
	bump    uint64
	log     cli.LogFlags
}

// NewRecoverCmd returns "fencer recover": rebuild a cluster that lost its
// quorum for good from its survivors.
func NewRecoverCmd() *cobra.Command {
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
exceed them. The epoch never passes 16777215, the last one whose tokens fit
in 64 bits: a bump that would move it past is refused before anything is
written. Held locks are voided for the same reason. Entries that only the
lost members had are gone; that is the price of forcing a quorum.`,
		Example: `  # n1 and n2 survive a 5-node cluster; on each, with the node stopped:
  fencer recover --id n1 --data-dir /var/lib/fencer \
    --members n1=10.0.0.1:8001@10.0.0.1:7001,n2=10.0.0.2:8001@10.0.0.2:7001`,
		Args: cli.Positional(),
		RunE: func(cmd *cobra.Command, _ []string) error { return o.run(cmd) },
	}
	cmd.Flags().StringVar(&o.id, "id", os.Getenv("FENCER_ID"), "this node's id ($FENCER_ID)")
	cmd.Flags().StringVar(&o.dataDir, "data-dir", os.Getenv("FENCER_DATA_DIR"), "this node's data dir ($FENCER_DATA_DIR)")
	cmd.Flags().StringVar(&o.members, "members", "", "the surviving members, id=RAFT_ADDR@HTTP_ADDR,…")
	cmd.Flags().Uint64Var(&o.bump, "epoch-bump", 1, "how far to move the token epoch")
	o.log.Bind(cmd.Flags())
	return cmd
}

func (o *recoverOptions) run(cmd *cobra.Command) error {
	if o.id == "" || o.dataDir == "" || o.members == "" {
		return cli.Usagef("--id, --data-dir and --members are required")
	}
	peers, err := cluster.ParseInitialCluster(o.members)
	if err != nil {
		return err
	}
	logger, err := o.log.Logger(cmd.ErrOrStderr())
	if err != nil {
		return err
	}
	logger.Info("forced recovery requested", "node", o.id, "members", o.members, "by", os.Getenv("USER"))
	h, err := recovery.Recover(recovery.Options{DataDir: o.dataDir, ID: o.id, Members: peers, EpochBump: o.bump, Logger: logger})
	if err != nil {
		return err
	}
	fmt.Fprintf(cmd.OutOrStdout(), "recovered %s: %d members, epoch %d, highest token so far %d; start the node now\n", o.id, len(peers), h.Epoch, h.LastToken)
	return nil
}
