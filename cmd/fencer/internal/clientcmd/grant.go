package clientcmd

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/fencer-io/fencer/api/client"
	"github.com/fencer-io/fencer/cmd/fencer/internal/cli"
)

// What "fencer lock" and "fencer sem" share: a grant (a lock's, or a
// semaphore's permit) that acquire prints, and that renew and release then
// name by its --token and --lease.

// grantWords are what the lock and sem groups say of their grants.
type grantWords struct {
	group   string // "lock" or "sem"
	example string // a name for the examples
	of      string // what --token and --lease belong to: "grant", "permit"
	renew   string // the renew subcommand's Short
	release string // the release subcommand's Short
}

// newRenewReleaseCmds returns the renew and release subcommands of a group,
// running renew and release on the NAME they are given.
func newRenewReleaseCmds(o *lockOptions, w grantWords, renew, release func(*cobra.Command, string) error) []*cobra.Command {
	o.group = w.group
	cmds := []*cobra.Command{
		{Use: "renew NAME --token N --lease SECRET", Short: w.renew, RunE: nameRun(renew)},
		{Use: "release NAME --token N --lease SECRET", Short: w.release, RunE: nameRun(release)},
	}
	for _, c := range cmds {
		c.Example = fmt.Sprintf(`  # $token and $lease as printed by "fencer %s acquire"
  fencer %s %s %s --token "$token" --lease "$lease"`, w.group, w.group, c.Name(), w.example)
		c.Args = cli.Positional("NAME")
		c.Flags().Var((*cli.TokenFlag)(&o.token), "token", "fencing token of the "+w.of)
		c.Flags().StringVar(&o.lease, "lease", "", "lease secret of the "+w.of)
	}
	return cmds
}

func nameRun(run func(*cobra.Command, string) error) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error { return run(cmd, args[0]) }
}

// callGrant is the body of renew and release: it checks --token and --lease,
// makes call on the grant they name, and prints its answer (text: how).
func callGrant[T any](cmd *cobra.Command, o *lockOptions, what string, call func(ctx context.Context, c *client.Client, token uint64, lease string) (T, error), text func(io.Writer, T) error) error {
	if err := o.validateLease(); err != nil {
		return err
	}
	return cli.Call(cmd, &o.client, what,
		func(ctx context.Context, c *client.Client) (T, error) { return call(ctx, c, o.token, o.lease) },
		text)
}

// printRenewed and printReleased are the text of a renewal's and a
// release's answer.
func printRenewed(w io.Writer, token uint64, ttlMillis int64) error {
	_, err := fmt.Fprintf(w, "token=%d ttl=%v\n", token, time.Duration(ttlMillis)*time.Millisecond)
	return err
}

func printReleased(w io.Writer, token uint64) error {
	_, err := fmt.Fprintf(w, "released token=%d\n", token)
	return err
}

// acquired prints what acquire got: v under -o json, else the lease's
// token, secret and TTL.
func (o *lockOptions) acquired(cmd *cobra.Command, lease *client.Lease, v any) error {
	g := lease.Grant()
	return o.printAcquired(cmd, g.Token, g.Lease, g.TTLMillis, v)
}

// printAcquired is acquired for a grant known by its fields: one acquired
// under a session, which has no Lease.
func (o *lockOptions) printAcquired(cmd *cobra.Command, token uint64, lease string, ttlMillis int64, v any) error {
	if o.client.JSON() {
		return cli.WriteJSON(cmd.OutOrStdout(), v)
	}
	_, err := fmt.Fprintf(cmd.OutOrStdout(), "token=%d lease=%s ttl=%v\n", token, lease, time.Duration(ttlMillis)*time.Millisecond)
	return err
}

// holderOrDefault is --holder, or the default a client.Acquire would use.
func (o *lockOptions) holderOrDefault() string {
	if o.holder == "" {
		return client.DefaultHolder()
	}
	return o.holder
}

// printEach prints each item with text.
func printEach[T any](w io.Writer, items []T, text func(io.Writer, T) error) error {
	for _, it := range items {
		if err := text(w, it); err != nil {
			return err
		}
	}
	return nil
}

// orEmpty returns items, or an empty slice for nil, so that a list prints
// as [] under -o json, not null.
func orEmpty[T any](items []T) []T {
	if items == nil {
		return []T{}
	}
	return items
}
