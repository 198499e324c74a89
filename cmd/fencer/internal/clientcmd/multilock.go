package clientcmd

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/fencer-io/fencer/api/client"
	"github.com/fencer-io/fencer/api/wire"
	"github.com/fencer-io/fencer/cmd/fencer/internal/cli"
)

// A multi-lock from the command line: "fencer lock acquire A B C" takes
// every name or none, with one token and one lease secret (--mode shared:
// every name in shared mode; with --wait,
// queued in every name's FIFO until all are free for it), and "fencer
// lock renew|release A B C --token N --lease S" renews or releases that
// one grant (the server knows its names by the token; renewing through
// one name alone works too, releasing one alone is refused).

// oneOrMoreNames requires at least one NAME.
func oneOrMoreNames(c *cobra.Command, args []string) error {
	if len(args) == 0 {
		return cli.Usagef("NAME is required: %s", c.UseLine())
	}
	return nil
}

func (o *lockOptions) multiAcquire(cmd *cobra.Command, names []string) error {
	switch {
	case o.durable:
		return cli.Usagef("--durable: a waiting multi-lock (several names) keeps its place on the leader only; a durable one is not built")
	case o.delay != 0:
		return cli.Usagef("--lock-delay: a multi-lock (several names) takes none")
	case o.session.id != 0 || o.session.lease != "":
		return cli.Usagef("--session: a multi-lock (several names) takes a --ttl, not a session")
	}
	if err := checkMode(o.mode); err != nil {
		return err
	}
	c, err := o.client.Client()
	if err != nil {
		return err
	}
	defer c.Close()
	m, err := c.MultiLock(cmd.Context(), names, client.TTL(o.ttl), client.Holder(o.holder), client.Wait(o.wait), client.Mode(o.mode), client.NoKeepAlive())
	if err != nil {
		return fmt.Errorf("acquire %s: %w", strings.Join(names, " "), err)
	}
	g := m.Grant()
	if o.client.JSON() {
		return cli.WriteJSON(cmd.OutOrStdout(), g)
	}
	_, err = fmt.Fprintf(cmd.OutOrStdout(), "token=%d lease=%s ttl=%v locks=%s\n", g.Token, g.Lease, time.Duration(g.TTLMillis)*time.Millisecond, strings.Join(g.Names, ","))
	return err
}

func (o *lockOptions) multiRenew(cmd *cobra.Command, names []string) error {
	return callGrant(cmd, o, fmt.Sprintf("renew %s token %d", strings.Join(names, " "), o.token),
		func(ctx context.Context, c *client.Client, token uint64, lease string) (wire.MultiRenewResponse, error) {
			return c.RenewMultiRaw(ctx, token, lease)
		},
		func(w io.Writer, out wire.MultiRenewResponse) error { return printRenewed(w, out.Token, out.TTLMillis) })
}

func (o *lockOptions) multiRelease(cmd *cobra.Command, names []string) error {
	return callGrant(cmd, o, fmt.Sprintf("release %s token %d", strings.Join(names, " "), o.token),
		func(ctx context.Context, c *client.Client, token uint64, lease string) (wire.MultiReleaseResponse, error) {
			err := c.ReleaseMultiRaw(ctx, token, lease)
			return wire.MultiReleaseResponse{Names: names, Token: token, Released: err == nil}, err
		},
		func(w io.Writer, out wire.MultiReleaseResponse) error { return printReleased(w, out.Token) })
}

// severalNames runs multi for several names and one for a single one.
func severalNames(one func(*cobra.Command, string) error, multi func(*cobra.Command, []string) error) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) > 1 {
			return multi(cmd, args)
		}
		return one(cmd, args[0])
	}
}
