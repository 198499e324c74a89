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

// semOptions are the flags of "fencer sem" and its subcommands.
type semOptions struct {
	lockOptions
	limit int
}

// NewSemCmd returns "fencer sem": take, renew, release and inspect
// semaphore permits by hand. To hold a permit while a program runs, use
// "fencer exec NAME --limit N".
//
// It is long because it declares every sem subcommand and its flags in one
// place, a table more than logic.
func NewSemCmd() *cobra.Command {
	o := &semOptions{}
	cmd := &cobra.Command{
		Use:   "sem",
		Short: "Acquire, renew, release and inspect semaphore permits",
		Example: `  fencer sem acquire workers --limit 3 --ttl 30s
  fencer sem status workers
  fencer sem list -o json`,
	}
	o.client.Bind(cmd.PersistentFlags())

	acquire := &cobra.Command{
		Use:   "acquire NAME --limit N",
		Short: "Take one of N permits and print its token and lease secret",
		Long: `Take one of the N permits of the semaphore NAME and print the permit's
fencing token and lease secret. N must equal the semaphore's limit while any
permit is held. The lease is NOT kept alive: it expires after --ttl unless
renewed. To hold a permit while a command runs, use "fencer exec NAME --limit N".
With --session and --session-lease the permit lives as long as that session
instead ("fencer session create").`,
		Example: `  fencer sem acquire workers --limit 3 --ttl 30s
  fencer sem acquire workers --limit 3 --wait 1m   # queue while all are held
  fencer sem acquire workers --limit 3 --wait 1m --durable   # keep the place across a leader change
  fencer sem acquire workers --limit 3 --session "$id" --session-lease "$lease"`,
		Args: cli.Positional("NAME"),
		RunE: func(cmd *cobra.Command, args []string) error { return o.acquire(cmd, args[0]) },
	}
	acquire.Flags().IntVar(&o.limit, "limit", 0, "the number of permits (1 to 10000; required)")
	acquire.Flags().DurationVar(&o.ttl, "ttl", wire.DefaultTTL, "lease time to live")
	acquire.Flags().DurationVar(&o.wait, "wait", 0, "queue this long while every permit is held (0: fail at once)")
	acquire.Flags().StringVar(&o.holder, "holder", "", "holder name shown in status (default hostname-pid)")
	acquire.Flags().DurationVar(&o.delay, "lock-delay", 0, "if this permit expires, its slot cannot be granted for this long (at most 1m)")
	bindDurable(acquire, &o.durable)
	o.session.bind(acquire)

	raw := newRenewReleaseCmds(&o.lockOptions, grantWords{group: "sem", example: "workers", of: "permit",
		renew: "Renew a permit's lease for another TTL", release: "Release a permit"}, o.renew, o.release)
	status := &cobra.Command{
		Use:   "status NAME",
		Short: "Show a semaphore's limit, holders and waiters",
		Example: `  fencer sem status workers
  fencer sem status workers -o json | jq '.holders | length'`,
		Args: cli.Positional("NAME"),
		RunE: func(cmd *cobra.Command, args []string) error { return o.status(cmd, args[0]) },
	}
	list := &cobra.Command{
		Use:   "list",
		Short: "List semaphores with a permit held",
		Example: `  fencer sem list
  fencer sem list -o json | jq -r '.semaphores[].semaphore'`,
		Args: cli.Positional(),
		RunE: func(cmd *cobra.Command, _ []string) error { return o.list(cmd) },
	}
	return cli.Group(cmd, acquire, raw[0], raw[1], status, list, newRevokeCmd(&o.lockOptions, "sem", "workers"))
}

func (o *semOptions) acquire(cmd *cobra.Command, name string) error {
	if o.limit < 1 || o.limit > wire.MaxSemaphoreLimit {
		return cli.Usagef("--limit %d: want 1 to %d", o.limit, wire.MaxSemaphoreLimit)
	}
	if err := o.session.validate(cmd); err != nil {
		return err
	}
	if err := checkDurable(o.durable, o.wait); err != nil {
		return err
	}
	c, err := o.client.Client()
	if err != nil {
		return err
	}
	defer c.Close()
	if o.session.id != 0 {
		p, err := c.AcquirePermitRaw(cmd.Context(), name, wire.SemAcquireRequest{Holder: o.holderOrDefault(), Limit: o.limit, WaitMs: o.wait.Milliseconds(),
			LockDelayMillis: o.delay.Milliseconds(), Session: o.session.id, SessionLease: o.session.lease,
			Durable: o.durable, RequestID: durableRequestID(o.durable)})
		if err != nil {
			return fmt.Errorf("acquire a permit of %q under session %d: %w", name, o.session.id, err)
		}
		return o.printAcquired(cmd, p.Token, p.Lease, p.TTLMillis, p)
	}
	lease, err := c.AcquirePermit(cmd.Context(), name, o.limit, append(o.durableOption(), client.TTL(o.ttl), client.Wait(o.wait), client.Holder(o.holder),
		client.LockDelay(o.delay), client.NoKeepAlive())...)
	if err != nil {
		return fmt.Errorf("acquire a permit of %q: %w", name, err)
	}
	g := lease.Grant()
	return o.acquired(cmd, lease, wire.PermitGrant{Semaphore: g.Lock, Holder: g.Holder, Token: g.Token, Lease: g.Lease,
		TTLMillis: g.TTLMillis, Limit: o.limit, Held: lease.Held(), RequestID: g.RequestID, Existing: g.Existing,
		LockDelayMillis: o.delay.Milliseconds(), Session: g.Session, WaitIndex: g.WaitIndex})
}

func (o *semOptions) renew(cmd *cobra.Command, name string) error {
	return callGrant(cmd, &o.lockOptions, fmt.Sprintf("renew permit %d of %q", o.token, name),
		func(ctx context.Context, c *client.Client, token uint64, lease string) (wire.SemRenewResponse, error) {
			return c.RenewPermitRaw(ctx, name, token, lease)
		},
		func(w io.Writer, out wire.SemRenewResponse) error { return printRenewed(w, out.Token, out.TTLMillis) })
}

func (o *semOptions) release(cmd *cobra.Command, name string) error {
	return callGrant(cmd, &o.lockOptions, fmt.Sprintf("release permit %d of %q", o.token, name),
		func(ctx context.Context, c *client.Client, token uint64, lease string) (wire.SemReleaseResponse, error) {
			err := c.ReleasePermitRaw(ctx, name, token, lease)
			return wire.SemReleaseResponse{Semaphore: name, Token: token, Released: true}, err
		},
		func(w io.Writer, out wire.SemReleaseResponse) error { return printReleased(w, out.Token) })
}

func (o *semOptions) status(cmd *cobra.Command, name string) error {
	return cli.Call(cmd, &o.client, fmt.Sprintf("status of semaphore %q", name),
		func(ctx context.Context, c *client.Client) (wire.SemaphoreStatus, error) {
			return c.Semaphore(ctx, name)
		},
		printSemaphore)
}

func (o *semOptions) list(cmd *cobra.Command) error {
	return cli.Call(cmd, &o.client, "list semaphores",
		func(ctx context.Context, c *client.Client) (wire.SemaphoreList, error) {
			sems, err := c.Semaphores(ctx)
			return wire.SemaphoreList{Semaphores: orEmpty(sems)}, err
		},
		func(w io.Writer, list wire.SemaphoreList) error { return printEach(w, list.Semaphores, printSemaphore) })
}

// printSemaphore writes one line for the semaphore, then one per permit.
func printSemaphore(w io.Writer, st wire.SemaphoreStatus) error {
	if _, err := fmt.Fprintf(w, "semaphore=%s limit=%d held=%d waiters=%d\n", st.Semaphore, st.Limit, len(st.Holders), st.Waiters); err != nil {
		return err
	}
	for _, h := range st.Holders {
		fields := []string{fmt.Sprintf("  holder=%q", h.Holder), fmt.Sprintf("token=%d", h.Token)}
		if h.RemainingMillis != nil {
			fields = append(fields, fmt.Sprintf("remaining=%v", time.Duration(*h.RemainingMillis)*time.Millisecond))
		}
		if _, err := fmt.Fprintln(w, strings.Join(fields, " ")); err != nil {
			return err
		}
	}
	for _, d := range st.Delays {
		left := time.Duration(d.RemainingMillis) * time.Millisecond
		if _, err := fmt.Fprintf(w, "  lock_delay since=%d remaining=%v\n", d.Since, left); err != nil {
			return err
		}
	}
	return nil
}
