package clientcmd

import (
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/fencer-io/fencer/api/wire"
	"github.com/fencer-io/fencer/cmd/fencer/internal/cli"
)

// historyOptions are the flags of "fencer lock history".
type historyOptions struct {
	lock  *lockOptions
	limit int
}

// newLockHistoryCmd returns "fencer lock history": a lock's last grants.
func newLockHistoryCmd(lock *lockOptions) *cobra.Command {
	o := &historyOptions{lock: lock}
	cmd := &cobra.Command{
		Use:   "history NAME",
		Short: "Show a lock's last grants, newest first, and how each ended",
		Long: `Show a lock's last grants, newest first: token, holder, the log index of
the grant, and how it ended (released, expired, handed_off, voided) or held.
The cluster keeps each lock's last --grant-history-per-lock grants (16 by
default); any member answers from its own applied state.`,
		Example: `  fencer lock history job
  fencer lock history job --limit 3 -o json | jq '.grants[0]'`,
		Args: cli.Positional("NAME"),
		RunE: func(cmd *cobra.Command, args []string) error { return o.run(cmd, args[0]) },
	}
	cmd.Flags().IntVar(&o.limit, "limit", 0, "at most this many grants (0: every one kept)")
	return cmd
}

func (o *historyOptions) run(cmd *cobra.Command, name string) error {
	if o.limit < 0 || o.limit > wire.MaxHistoryLimit {
		return cli.Usagef("--limit %d: want 0 to %d", o.limit, wire.MaxHistoryLimit)
	}
	c, err := o.lock.client.Client()
	if err != nil {
		return err
	}
	defer c.Close()
	grants, err := c.History(cmd.Context(), name, o.limit)
	if err != nil {
		return fmt.Errorf("history of %q: %w", name, err)
	}
	if o.lock.client.JSON() {
		return cli.WriteJSON(cmd.OutOrStdout(), wire.LockHistory{Lock: name, Grants: orEmpty(grants)})
	}
	for _, g := range grants {
		if err := printGrant(cmd.OutOrStdout(), g, false); err != nil {
			return err
		}
	}
	return nil
}

// printGrant writes one line of key=value pairs, with the lock (or, for a
// permit, the semaphore) when withLock.
func printGrant(w io.Writer, g wire.GrantRecord, withLock bool) error {
	fields := []string{fmt.Sprintf("token=%d", g.Token)}
	switch {
	case withLock && g.Semaphore != "":
		fields = append(fields, "semaphore="+g.Semaphore)
	case withLock:
		fields = append(fields, "lock="+g.Lock)
	}
	fields = append(fields, fmt.Sprintf("holder=%q", g.Holder), fmt.Sprintf("granted_index=%d", g.GrantedIndex), "ended="+g.Ended)
	if g.EndedIndex != 0 {
		fields = append(fields, fmt.Sprintf("ended_index=%d", g.EndedIndex))
	}
	_, err := fmt.Fprintln(w, strings.Join(fields, " "))
	return err
}
