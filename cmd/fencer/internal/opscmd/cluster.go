package opscmd

import (
	"context"
	"fmt"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/fencer-io/fencer/api/wire"
	"github.com/fencer-io/fencer/cmd/fencer/internal/cli"
)

// memberView is one row of "fencer cluster status": the leader's record of
// the member plus what the member says of itself.
type memberView struct {
	wire.Member
	State        string `json:"state"`
	Term         uint64 `json:"term,omitempty"`
	AppliedIndex uint64 `json:"applied_index,omitempty"`
	LastContact  string `json:"last_contact,omitempty"`
	Error        string `json:"error,omitempty"`
}

// ClusterView is the -o json output of "fencer cluster status".
type ClusterView struct {
	Leader       string       `json:"leader"`
	Term         uint64       `json:"term"`
	CommitIndex  uint64       `json:"commit_index"`
	AppliedIndex uint64       `json:"applied_index"`
	Epoch        uint64       `json:"epoch"`
	LastToken    uint64       `json:"last_token"`
	LogFormat    int          `json:"log_format"`
	Members      []memberView `json:"members"`
}

// NewClusterCmd returns "fencer cluster": status and leadership transfer.
//
// It is long because it declares every cluster subcommand and its flags in
// one place, a table more than logic.
func NewClusterCmd() *cobra.Command {
	f := &cli.ClientFlags{}
	cmd := &cobra.Command{
		Use:   "cluster",
		Short: "Show cluster status and transfer leadership",
		Example: `  fencer cluster status
  fencer cluster transfer-leader n2`,
	}
	f.Bind(cmd.PersistentFlags())
	status := &cobra.Command{
		Use:   "status",
		Short: "Leader, term, commit/applied index, and each member's state and last contact",
		Example: `  fencer cluster status
  fencer cluster status -o json | jq -r .leader`,
		Args: cli.Positional(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := f.Client()
			if err != nil {
				return err
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), f.Timeout)
			defer cancel()
			st, err := c.Cluster(ctx)
			if err != nil {
				return err
			}
			v := ClusterView{Leader: st.Leader, Term: st.Term, CommitIndex: st.CommitIndex, AppliedIndex: st.AppliedIndex, Epoch: st.Epoch, LastToken: st.LastToken, LogFormat: st.LogFormat}
			for _, m := range st.Members {
				mv := memberView{Member: m}
				if m.HTTPAddr == "" {
					mv.State, mv.Error = "unknown", "its HTTP address is not recorded yet"
				} else if self, err := c.MemberStatus(ctx, m.HTTPAddr); err != nil {
					mv.State, mv.Error = "unreachable", err.Error()
				} else {
					mv.State, mv.Term, mv.AppliedIndex, mv.LastContact = self.State, self.Term, self.AppliedIndex, self.LastContact
				}
				v.Members = append(v.Members, mv)
			}
			if f.JSON() {
				return cli.WriteJSON(cmd.OutOrStdout(), v)
			}
			out := cmd.OutOrStdout()
			fmt.Fprintf(out, "leader %s  term %d  commit %d  applied %d  epoch %d  last token %d  log format %d\n\n",
				v.Leader, v.Term, v.CommitIndex, v.AppliedIndex, v.Epoch, v.LastToken, v.LogFormat)
			tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "ID\tSTATE\tVOTER\tAPPLIED\tLAST CONTACT\tHTTP\tRAFT\tFORMAT")
			for _, m := range v.Members {
				contact := m.LastContact
				if m.Error != "" {
					contact = m.Error
				}
				fmt.Fprintf(tw, "%s\t%s\t%v\t%d\t%s\t%s\t%s\t%d\n", m.ID, m.State, m.Voter, m.AppliedIndex, contact, m.HTTPAddr, m.RaftAddr, m.LogFormat)
			}
			return tw.Flush()
		},
	}
	transfer := &cobra.Command{
		Use:   "transfer-leader [ID]",
		Short: "Hand leadership to ID, or to the most up-to-date follower",
		Example: `  fencer cluster transfer-leader        # to the most up-to-date follower
  fencer cluster transfer-leader n2`,
		Args: cli.Optional("ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := f.Client()
			if err != nil {
				return err
			}
			id := ""
			if len(args) == 1 {
				id = args[0]
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), 3*f.Timeout)
			defer cancel()
			if err := c.TransferLeader(ctx, id); err != nil {
				return err
			}
			fmt.Fprintln(cmd.OutOrStdout(), "leadership transferred")
			return nil
		},
	}
	return cli.Group(cmd, status, transfer)
}
