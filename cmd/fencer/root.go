package main

import (
	"io"

	"github.com/spf13/cobra"

	"github.com/fencer-io/fencer/cmd/fencer/internal/cli"
	"github.com/fencer-io/fencer/cmd/fencer/internal/clientcmd"
	"github.com/fencer-io/fencer/cmd/fencer/internal/devcmd"
	"github.com/fencer-io/fencer/cmd/fencer/internal/opscmd"
)

// newRootCmd returns the fencer command. Every subcommand is listed here, in
// the order "fencer --help" shows them.
func newRootCmd(stdout, stderr io.Writer) *cobra.Command {
	root := &cobra.Command{
		Use:   "fencer",
		Short: "fencer: a Raft lock service whose grants carry fencing tokens",
		Example: `  fencer dev                                   # a local 3-node cluster
  fencer lock acquire job --ttl 30s -o json     # token and lease secret
  fencer exec job -- ./batch.sh                 # run while holding the lock
  fencer watch jobs.                            # lock events as they happen
  fencer cluster status`,
		Version:       readBuildInfo().String(),
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.SetVersionTemplate("fencer {{.Version}}\n")
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return cli.Usage(err) })
	root.PersistentPreRun = func(cmd *cobra.Command, _ []string) { cli.WarnDeprecated(cmd, cli.WantsJSON(cmd, nil)) }
	cli.Group(root,
		opscmd.NewServeCmd(),
		devcmd.NewDevCmd(),
		clientcmd.NewLockCmd(),
		clientcmd.NewSemCmd(),
		clientcmd.NewSessionCmd(),
		clientcmd.NewElectCmd(),
		clientcmd.NewLeaderCmd(),
		clientcmd.NewKVCmd(),
		clientcmd.NewExecCmd(),
		clientcmd.NewWatchCmd(),
		clientcmd.NewTokenCmd(),
		opscmd.NewMembersCmd(),
		opscmd.NewClusterCmd(),
		opscmd.NewSnapshotCmd(),
		opscmd.NewRecoverCmd(),
		opscmd.NewMigrateLogCmd(),
		opscmd.NewTLSCmd(),
		opscmd.NewResourceCmd(),
		opscmd.NewFenceProxyCmd(),
		opscmd.NewBenchCmd(),
		newVersionCmd(),
	)
	return root
}
