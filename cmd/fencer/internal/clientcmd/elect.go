package clientcmd

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/fencer-io/fencer/api/client"
	"github.com/fencer-io/fencer/cmd/fencer/internal/cli"
)

// NewElectCmd returns "fencer elect": "fencer exec" for an election. It
// campaigns until elected, then runs the command while it leads, with the
// term of office (the grant's token) in FENCER_TOKEN.
func NewElectCmd() *cobra.Command {
	o := &execOptions{elect: true}
	cmd := execCommand(o)
	cmd.Use = "elect NAME --value V [flags] -- COMMAND [ARGS...]"
	cmd.Short = "Campaign until elected, then run a command while leading"
	cmd.Long = `Campaign in the election NAME (a lock whose holder publishes a value) until
elected, publishing --value (at most 4 KiB: your address, say), then run
COMMAND while leading, exactly as "fencer exec" runs it: FENCER_TOKEN is the
term of office (the grant's fencing token; a resource fenced on it refuses a
deposed leader), SIGTERM then SIGKILL after --grace if leadership is lost
(exit 75), the command's status passed on, and the lock released when it
exits. "fencer leader NAME" shows who leads.`
	cmd.Example = `  fencer elect scheduler --value "$(hostname):8080" -- ./scheduler
  fencer elect scheduler --value 10.0.0.7:8080 --ttl 5s -- ./scheduler`
	cmd.Flags().StringVar(&o.value, "value", "", "the value published while leading (at most 4 KiB)")
	return cmd
}

// NewLeaderCmd returns "fencer leader": who leads an election.
func NewLeaderCmd() *cobra.Command {
	o := &lockOptions{}
	var watch bool
	cmd := &cobra.Command{
		Use:   "leader NAME",
		Short: "Show an election's leader, its value and term (token)",
		Example: `  fencer leader scheduler
  fencer leader scheduler -o json | jq -r .value
  fencer leader scheduler --watch            # a line per new term or value`,
		Args: cli.Positional("NAME"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := o.client.Client()
			if err != nil {
				return err
			}
			defer c.Close()
			if watch {
				return watchLeader(cmd, c, args[0], o.client.JSON())
			}
			st, err := c.ElectionLeader(cmd.Context(), args[0])
			if err != nil {
				return fmt.Errorf("leader of %q: %w", args[0], err)
			}
			if o.client.JSON() {
				return cli.WriteJSON(cmd.OutOrStdout(), st)
			}
			if !st.Held {
				_, err = fmt.Fprintf(cmd.OutOrStdout(), "election=%s leader=none\n", st.Lock)
				return err
			}
			fields := []string{"election=" + st.Lock, fmt.Sprintf("leader=%q", st.Holder), fmt.Sprintf("term=%d", st.Token), fmt.Sprintf("value=%q", st.Value)}
			_, err = fmt.Fprintln(cmd.OutOrStdout(), strings.Join(fields, " "))
			return err
		},
	}
	o.client.Bind(cmd.Flags())
	cmd.Flags().BoolVar(&watch, "watch", false, "print the leader, then every new term or value until interrupted")
	return cmd
}

// watchLeader prints each leadership Observe yields, one line (or JSON
// object) each.
func watchLeader(cmd *cobra.Command, c *client.Client, name string, asJSON bool) error {
	for l, err := range c.Observe(cmd.Context(), name) {
		if err != nil {
			return fmt.Errorf("watch the leader of %q: %w", name, err)
		}
		if asJSON {
			err = cli.WriteJSON(cmd.OutOrStdout(), struct {
				Election string `json:"election"`
				Holder   string `json:"holder"`
				Term     uint64 `json:"term"`
				Value    string `json:"value"`
			}{name, l.Holder, l.Token, l.Value})
		} else {
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "election=%s leader=%q term=%d value=%q\n", name, l.Holder, l.Token, l.Value)
		}
		if err != nil {
			return err
		}
	}
	return nil
}
