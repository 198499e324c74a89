package opscmd

import (
	"context"
	"fmt"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/fencer-io/fencer/api/wire"
	"github.com/fencer-io/fencer/cmd/fencer/internal/cli"
)

// memberList is "fencer members list -o json": an object, as "fencer lock
// list -o json" is, so that either can grow fields.
type memberList struct {
	Members []wire.Member `json:"members"`
}

type membersOptions struct {
	client   cli.ClientFlags
	raftAddr string
	httpAddr string
	nonVoter bool
}

// NewMembersCmd returns "fencer members": list, add and remove members.
//
// It is long because it declares every members subcommand and its flags in
// one place, a table more than logic.
func NewMembersCmd() *cobra.Command {
	o := &membersOptions{}
	cmd := &cobra.Command{
		Use:   "members",
		Short: "List, add and remove cluster members",
		Example: `  fencer members list
  fencer members add n4 --raft-addr 10.0.0.4:8001 --http-addr 10.0.0.4:7001
  fencer members remove n4`,
	}
	o.client.Bind(cmd.PersistentFlags())
	list := &cobra.Command{
		Use:   "list",
		Short: "List the members",
		Example: `  fencer members list
  fencer members list -o json | jq -r '.members[] | select(.leader) | .id'`,
		Args: cli.Positional(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			st, err := clusterStatus(cmd, &o.client)
			if err != nil {
				return err
			}
			if o.client.JSON() {
				return cli.WriteJSON(cmd.OutOrStdout(), memberList{Members: st.Members})
			}
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "ID\tRAFT\tHTTP\tVOTER\tLEADER")
			for _, m := range st.Members {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%v\t%v\n", m.ID, m.RaftAddr, m.HTTPAddr, m.Voter, m.Leader)
			}
			return tw.Flush()
		},
	}
	add := &cobra.Command{
		Use:   "add ID --raft-addr HOST:PORT --http-addr HOST:PORT",
		Short: "Add a member (start it with --join afterwards, or before)",
		Example: `  fencer members add n4 --raft-addr 10.0.0.4:8001 --http-addr 10.0.0.4:7001
  fencer members add r1 --raft-addr 10.0.0.9:8001 --http-addr 10.0.0.9:7001 --non-voter`,
		Args: cli.Positional("ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if o.raftAddr == "" || o.httpAddr == "" {
				return cli.Usagef("--raft-addr and --http-addr are required")
			}
			c, err := o.client.Client()
			if err != nil {
				return err
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), o.client.Timeout)
			defer cancel()
			if err := c.AddMember(ctx, args[0], o.raftAddr, o.httpAddr, !o.nonVoter); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "added %s (voter=%v)\n", args[0], !o.nonVoter)
			return nil
		},
	}
	add.Flags().StringVar(&o.raftAddr, "raft-addr", "", "the member's Raft address")
	add.Flags().StringVar(&o.httpAddr, "http-addr", "", "the member's HTTP address")
	add.Flags().BoolVar(&o.nonVoter, "non-voter", false, "add a non-voter that only replicates")
	remove := &cobra.Command{
		Use:     "remove ID",
		Short:   "Remove a member (removing the leader transfers leadership first)",
		Example: `  fencer members remove n4`,
		Args:    cli.Positional("ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := o.client.Client()
			if err != nil {
				return err
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), 3*o.client.Timeout)
			defer cancel()
			if err := c.RemoveMember(ctx, args[0]); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "removed %s\n", args[0])
			return nil
		},
	}
	return cli.Group(cmd, list, add, remove)
}

func clusterStatus(cmd *cobra.Command, f *cli.ClientFlags) (wire.ClusterStatus, error) {
	c, err := f.Client()
	if err != nil {
		return wire.ClusterStatus{}, err
	}
	ctx, cancel := context.WithTimeout(cmd.Context(), f.Timeout)
	defer cancel()
	return c.Cluster(ctx)
}
