package clientcmd

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/fencer-io/fencer/api/client"
	"github.com/fencer-io/fencer/api/wire"
	"github.com/fencer-io/fencer/cmd/fencer/internal/cli"
)

// newRevokeCmd is "fencer lock revoke NAME --token N" (group "lock") and
// "fencer sem revoke NAME --token N" (group "sem"): an operator ends
// another's grant now, as an expiry would.
func newRevokeCmd(o *lockOptions, group, example string) *cobra.Command {
	what := map[string]string{"lock": "a lock's grant", "sem": "a semaphore permit"}[group]
	cmd := &cobra.Command{
		Use:   "revoke NAME --token N",
		Short: "End " + what + " now, as its expiry would (operators only)",
		Long: `End ` + what + ` now, as its expiry would: its lock-delay starts, and
the next waiter is granted in the same log entry. The holder's next renewal
is refused (410 revoked) and its fenced writes with the old token are
refused. Operators only; audited.`,
		Example: fmt.Sprintf(`  fencer %s status %s              # find the token
  fencer %s revoke %s --token 1234`, group, example, group, example),
		Args: cli.Positional("NAME"),
		RunE: func(cmd *cobra.Command, args []string) error {
			name := args[0]
			if o.token == 0 {
				return cli.Usagef("--token is required: the token of the grant to revoke (\"fencer %s status %s\")", group, name)
			}
			return cli.Call(cmd, &o.client, fmt.Sprintf("revoke %q token %d", name, o.token),
				func(ctx context.Context, c *client.Client) (wire.RevokeResponse, error) {
					if group == "sem" {
						return c.RevokePermit(ctx, name, o.token)
					}
					return c.RevokeLock(ctx, name, o.token)
				}, printRevoked)
		},
	}
	cmd.Flags().Var((*cli.TokenFlag)(&o.token), "token", "fencing token of the grant to revoke")
	return cmd
}

func printRevoked(w io.Writer, out wire.RevokeResponse) error {
	line := fmt.Sprintf("revoked token=%d holder=%q", out.Token, out.Holder)
	if out.NextToken != 0 {
		line += fmt.Sprintf(" next_token=%d next_holder=%q", out.NextToken, out.NextHolder)
	}
	if out.LockDelayMillis != 0 {
		line += fmt.Sprintf(" lock_delay=%v", time.Duration(out.LockDelayMillis)*time.Millisecond)
	}
	_, err := fmt.Fprintln(w, line)
	return err
}

// newSessionRevokeCmd is "fencer session revoke ID".
func newSessionRevokeCmd(o *sessionOptions) *cobra.Command {
	return &cobra.Command{
		Use:   "revoke ID",
		Short: "End a session and every grant under it now, as its expiry would (operators only)",
		Long: `End a session and every grant under it now, in one log entry, as its
expiry would: each grant's lock-delay starts, and freed names go to their
waiters. The session's next renewal is refused (410 revoked). Operators only;
audited.`,
		Example: `  fencer session list
  fencer session revoke 1234 -o json | jq -r '.revoked[].name'`,
		Args: cli.Positional("ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := parseSessionID(args[0])
			if err != nil {
				return err
			}
			return cli.Call(cmd, &o.client, fmt.Sprintf("revoke session %d", id),
				func(ctx context.Context, c *client.Client) (wire.SessionRevokeResponse, error) {
					return c.RevokeSession(ctx, id)
				},
				func(w io.Writer, out wire.SessionRevokeResponse) error {
					if _, err := fmt.Fprintf(w, "revoked session=%d holder=%q grants=%d\n", out.Session, out.Holder, len(out.Revoked)); err != nil {
						return err
					}
					return printGrants(w, out.Revoked)
				})
		},
	}
}
