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

// sessionOptions are the flags of "fencer session" and its subcommands.
type sessionOptions struct {
	client    cli.ClientFlags
	ttl       time.Duration
	holder    string
	delay     time.Duration
	requestID string
	lease     string
}

// NewSessionCmd returns "fencer session": create, renew, close and inspect
// sessions by hand, and with "--session ID --session-lease S" on "fencer
// lock acquire" and "fencer sem acquire", hold grants under one.
//
// It is long because it declares every session subcommand and its flags in
// one place, a table more than logic.
func NewSessionCmd() *cobra.Command {
	o := &sessionOptions{}
	cmd := &cobra.Command{
		Use:   "session",
		Short: "Create, renew, close and inspect sessions (one lease for many grants)",
		Long: `A session is one lease for many grants: locks and semaphore permits
acquired with --session ID --session-lease S live as long as the session,
which one renewal keeps alive whatever it holds. When the session expires or
is closed, every grant under it ends in the same log entry.`,
		Example: `  fencer session create --ttl 30s
  fencer session status 1234
  fencer session list -o json`,
	}
	o.client.Bind(cmd.PersistentFlags())

	create := &cobra.Command{
		Use:   "create",
		Short: "Create a session and print its id and lease secret",
		Long: `Create a session and print its id and lease secret.

The session is NOT kept alive: it expires after --ttl, and every grant under
it with it, unless renewed with "fencer session renew ID --lease S" or closed.`,
		Example: `  fencer session create --ttl 30s --holder "$(hostname)"

  # keep the id and secret for acquires, renew and close (needs jq)
  s=$(fencer session create -o json)
  id=$(echo "$s" | jq -r .session) lease=$(echo "$s" | jq -r .lease)
  fencer lock acquire job --session "$id" --session-lease "$lease"`,
		Args: cli.Positional(),
		RunE: func(cmd *cobra.Command, _ []string) error { return o.create(cmd) },
	}
	create.Flags().DurationVar(&o.ttl, "ttl", wire.DefaultTTL, "the session's time to live")
	create.Flags().StringVar(&o.holder, "holder", "", "holder name shown in session status (default hostname-pid)")
	create.Flags().DurationVar(&o.delay, "lock-delay", 0, "if the session expires, each of its grants' names cannot be acquired for this long (at most 1m)")
	create.Flags().StringVar(&o.requestID, "request-id", "", "a create retried with the same id gets the same session back (default random)")

	renew := &cobra.Command{
		Use:   "renew ID --lease SECRET",
		Short: "Renew a session for another TTL",
		Example: `  # $id and $lease as printed by "fencer session create"
  fencer session renew "$id" --lease "$lease"`,
		Args: cli.Positional("ID"),
		RunE: func(cmd *cobra.Command, args []string) error { return o.renew(cmd, args[0]) },
	}
	closeCmd := &cobra.Command{
		Use:   "close ID --lease SECRET",
		Short: "Close a session, releasing every grant under it, and print them",
		Example: `  # $id and $lease as printed by "fencer session create"
  fencer session close "$id" --lease "$lease"
  fencer session close "$id" --lease "$lease" -o json | jq -r '.released[].name'`,
		Args: cli.Positional("ID"),
		RunE: func(cmd *cobra.Command, args []string) error { return o.close(cmd, args[0]) },
	}
	for _, c := range []*cobra.Command{renew, closeCmd} {
		c.Flags().StringVar(&o.lease, "lease", "", "lease secret of the session")
	}
	status := &cobra.Command{
		Use:   "status ID",
		Short: "Show a session's holder, remaining time and grants",
		Example: `  fencer session status 1234
  fencer session status 1234 -o json | jq '.grants | length'`,
		Args: cli.Positional("ID"),
		RunE: func(cmd *cobra.Command, args []string) error { return o.status(cmd, args[0]) },
	}
	list := &cobra.Command{
		Use:   "list",
		Short: "List sessions",
		Example: `  fencer session list
  fencer session list -o json | jq -r '.sessions[].session'`,
		Args: cli.Positional(),
		RunE: func(cmd *cobra.Command, _ []string) error { return o.list(cmd) },
	}
	return cli.Group(cmd, create, renew, closeCmd, status, list, newSessionRevokeCmd(o))
}

// parseSessionID reads a session id as a token is read: a session's id is
// an index from the same sequence.
func parseSessionID(arg string) (uint64, error) {
	id, ok := wire.ParseToken(arg)
	if !ok {
		return 0, cli.Usagef("session id %q: want a positive decimal integer, as printed by \"fencer session create\"", arg)
	}
	return id, nil
}

func (o *sessionOptions) create(cmd *cobra.Command) error {
	if o.ttl <= 0 {
		return cli.Usagef("--ttl %v: want %v to %v", o.ttl, wire.MinTTL, wire.MaxTTL)
	}
	holder := o.holder
	if holder == "" {
		holder = client.DefaultHolder()
	}
	return cli.Call(cmd, &o.client, "create a session",
		func(ctx context.Context, c *client.Client) (wire.Session, error) {
			return c.CreateSessionRaw(ctx, wire.SessionRequest{Holder: holder, TTLMillis: o.ttl.Milliseconds(),
				LockDelayMillis: o.delay.Milliseconds(), RequestID: o.requestID})
		},
		func(w io.Writer, s wire.Session) error {
			_, err := fmt.Fprintf(w, "session=%d lease=%s ttl=%v\n", s.Session, s.Lease, time.Duration(s.TTLMillis)*time.Millisecond)
			return err
		})
}

// withLease checks ID and --lease, and makes call on the session they name.
func withLease[T any](cmd *cobra.Command, o *sessionOptions, arg, verb string, call func(ctx context.Context, c *client.Client, id uint64, lease string) (T, error), text func(io.Writer, T) error) error {
	id, err := parseSessionID(arg)
	if err != nil {
		return err
	}
	if o.lease == "" {
		return cli.Usagef("--lease is required: the lease secret printed by \"fencer session create\"")
	}
	return cli.Call(cmd, &o.client, fmt.Sprintf("%s session %d", verb, id),
		func(ctx context.Context, c *client.Client) (T, error) { return call(ctx, c, id, o.lease) },
		text)
}

func (o *sessionOptions) renew(cmd *cobra.Command, arg string) error {
	return withLease(cmd, o, arg, "renew",
		func(ctx context.Context, c *client.Client, id uint64, lease string) (wire.SessionRenewResponse, error) {
			return c.RenewSessionRaw(ctx, id, lease)
		},
		func(w io.Writer, out wire.SessionRenewResponse) error {
			_, err := fmt.Fprintf(w, "session=%d ttl=%v\n", out.Session, time.Duration(out.TTLMillis)*time.Millisecond)
			return err
		})
}

func (o *sessionOptions) close(cmd *cobra.Command, arg string) error {
	return withLease(cmd, o, arg, "close",
		func(ctx context.Context, c *client.Client, id uint64, lease string) (wire.SessionCloseResponse, error) {
			return c.CloseSessionRaw(ctx, id, lease)
		},
		func(w io.Writer, out wire.SessionCloseResponse) error {
			if _, err := fmt.Fprintf(w, "closed session=%d released=%d\n", out.Session, len(out.Released)); err != nil {
				return err
			}
			return printGrants(w, out.Released)
		})
}

func (o *sessionOptions) status(cmd *cobra.Command, arg string) error {
	id, err := parseSessionID(arg)
	if err != nil {
		return err
	}
	return cli.Call(cmd, &o.client, fmt.Sprintf("status of session %d", id),
		func(ctx context.Context, c *client.Client) (wire.SessionStatus, error) { return c.Session(ctx, id) },
		printSession)
}

func (o *sessionOptions) list(cmd *cobra.Command) error {
	return cli.Call(cmd, &o.client, "list sessions",
		func(ctx context.Context, c *client.Client) (wire.SessionList, error) {
			sessions, err := c.Sessions(ctx)
			return wire.SessionList{Sessions: orEmpty(sessions)}, err
		},
		func(w io.Writer, list wire.SessionList) error { return printEach(w, list.Sessions, printSession) })
}

// printSession writes one line for the session, then one per grant.
func printSession(w io.Writer, st wire.SessionStatus) error {
	fields := []string{fmt.Sprintf("session=%d", st.Session), fmt.Sprintf("holder=%q", st.Holder),
		fmt.Sprintf("ttl=%v", time.Duration(st.TTLMillis)*time.Millisecond)}
	if st.RemainingMillis != nil {
		fields = append(fields, fmt.Sprintf("remaining=%v", time.Duration(*st.RemainingMillis)*time.Millisecond))
	}
	if st.LockDelayMillis != 0 {
		fields = append(fields, fmt.Sprintf("lock_delay=%v", time.Duration(st.LockDelayMillis)*time.Millisecond))
	}
	fields = append(fields, fmt.Sprintf("grants=%d", len(st.Grants)))
	if _, err := fmt.Fprintln(w, strings.Join(fields, " ")); err != nil {
		return err
	}
	return printGrants(w, st.Grants)
}

func printGrants(w io.Writer, grants []wire.SessionGrant) error {
	for _, g := range grants {
		if _, err := fmt.Fprintf(w, "  kind=%s name=%s token=%d\n", g.Kind, g.Name, g.Token); err != nil {
			return err
		}
	}
	return nil
}

// sessionFlags are --session and --session-lease on an acquire: the grant
// is then held under that session, with no TTL of its own.
type sessionFlags struct {
	id    uint64
	lease string
}

func (s *sessionFlags) bind(cmd *cobra.Command) {
	cmd.Flags().Var((*cli.TokenFlag)(&s.id), "session", "acquire under this session (its id, from \"fencer session create\"): the grant lives as long as the session, instead of --ttl")
	cmd.Flags().StringVar(&s.lease, "session-lease", "", "lease secret of the --session")
}

// validate checks that the two flags come together, and without --ttl.
func (s *sessionFlags) validate(cmd *cobra.Command) error {
	switch {
	case s.id == 0 && s.lease == "":
		return nil
	case s.id == 0:
		return cli.Usagef("--session-lease needs --session: the session's id, printed by \"fencer session create\"")
	case s.lease == "":
		return cli.Usagef("--session needs --session-lease: the session's lease secret, printed by \"fencer session create\"")
	case cmd.Flags().Changed("ttl"):
		return cli.Usagef("--ttl and --session: a grant under a session lives as long as the session (its --ttl is given to \"fencer session create\")")
	}
	return nil
}
