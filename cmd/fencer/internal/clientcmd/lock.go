// Package clientcmd holds the commands that use a cluster's primitives:
// lock, sem, session, elect and leader, kv, exec, watch and token. Each is an
// options struct whose flags are validated and then run.
package clientcmd

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/fencer-io/fencer/api/client"
	"github.com/fencer-io/fencer/api/wire"
	"github.com/fencer-io/fencer/cmd/fencer/internal/cli"
)

// lockOptions are the flags of "fencer lock" and its subcommands.
type lockOptions struct {
	client cli.ClientFlags
	ttl    time.Duration
	wait   time.Duration
	delay  time.Duration
	holder string
	token  uint64
	lease  string
	group  string // "lock" or "sem": whose acquire printed --token and --lease
	mode   string // --mode on lock acquire: shared or exclusive
	// durable is --durable on acquire: the waiter's place is kept in the
	// log across a leader change.
	durable bool
	// session is --session and --session-lease on acquire.
	session sessionFlags
}

func (o *lockOptions) validateLease() error {
	if o.token == 0 {
		return cli.Usagef("--token is required: the token printed by \"fencer %s acquire\"", o.group)
	}
	if o.lease == "" {
		return cli.Usagef("--lease is required: the lease secret printed by \"fencer %s acquire\"", o.group)
	}
	return nil
}

// NewLockCmd returns "fencer lock": acquire, renew, release and inspect
// locks by hand. To hold a lock while a program runs, use "fencer exec".
//
// It is long because it declares every lock subcommand and its flags in one
// place, a table more than logic.
func NewLockCmd() *cobra.Command {
	o := &lockOptions{}
	cmd := &cobra.Command{
		Use:   "lock",
		Short: "Acquire, renew, release and inspect locks",
		Example: `  fencer lock acquire job --ttl 30s
  fencer lock status job
  fencer lock history job
  fencer lock list -o json`,
	}
	o.client.Bind(cmd.PersistentFlags())

	acquire := &cobra.Command{
		Use:   "acquire NAME...",
		Short: "Acquire a lock (or several at once) and print its token and lease secret",
		Long: `Acquire a lock and print its fencing token and lease secret.

The lease is NOT kept alive: it expires after --ttl unless renewed with
"fencer lock renew NAME --token N --lease S" or released. To hold a lock for
the lifetime of a command, use "fencer exec". With --session and
--session-lease the grant has no TTL of its own: it lives as long as that
session ("fencer session create"), and is released as any other.

With several names it is a multi-lock: every name or none, in one entry,
with one token and one lease secret for all (at most 64 names). It does not
wait; renew and release it with all its names ("fencer lock release A B C
--token N --lease S").`,
		Example: `  fencer lock acquire job --ttl 30s --holder "$(hostname)"
  fencer lock acquire job --wait 1m          # queue behind the holder
  fencer lock acquire table --mode shared    # one of many readers
  fencer lock acquire job --wait 1m --durable   # keep the place in the queue across a leader change
  fencer lock acquire job --session "$id" --session-lease "$lease"   # under a session
  fencer lock acquire accounts.alice accounts.bob   # both or neither, one token

  # keep the token and secret for renew and release (needs jq)
  grant=$(fencer lock acquire job -o json)
  token=$(echo "$grant" | jq -r .token) lease=$(echo "$grant" | jq -r .lease)`,
		Args: oneOrMoreNames,
		RunE: severalNames(o.acquire, o.multiAcquire),
	}
	acquire.Flags().DurationVar(&o.ttl, "ttl", wire.DefaultTTL, "lease time to live")
	acquire.Flags().DurationVar(&o.wait, "wait", 0, "queue this long if the lock is held (0: fail at once)")
	acquire.Flags().StringVar(&o.holder, "holder", "", "holder name shown in lock status (default hostname-pid)")
	acquire.Flags().DurationVar(&o.delay, "lock-delay", 0, "if this grant expires, nobody can acquire the lock for this long (at most 1m)")
	acquire.Flags().StringVar(&o.mode, "mode", wire.ModeExclusive, "shared (many holders at once, none can write under the lock) or exclusive")
	bindDurable(acquire, &o.durable)
	o.session.bind(acquire)

	raw := newRenewReleaseCmds(o, grantWords{group: "lock", example: "job", of: "grant",
		renew: "Renew a lease for another TTL", release: "Release a lease"}, o.renew, o.release)
	// Several names: a multi-lock's one grant (multilock.go).
	for i, multi := range []func(*cobra.Command, []string) error{o.multiRenew, o.multiRelease} {
		one := []func(*cobra.Command, string) error{o.renew, o.release}[i]
		raw[i].Use = strings.Replace(raw[i].Use, "NAME", "NAME...", 1)
		raw[i].Args, raw[i].RunE = oneOrMoreNames, severalNames(one, multi)
	}
	status := &cobra.Command{
		Use:   "status NAME",
		Short: "Show a lock's holder, token and remaining time",
		Example: `  fencer lock status job
  fencer lock status job -o json | jq .token`,
		Args: cli.Positional("NAME"),
		RunE: func(cmd *cobra.Command, args []string) error { return o.status(cmd, args[0]) },
	}
	list := &cobra.Command{
		Use:   "list",
		Short: "List held locks",
		Example: `  fencer lock list
  fencer lock list -o json | jq -r '.locks[].lock'`,
		Args: cli.Positional(),
		RunE: func(cmd *cobra.Command, _ []string) error { return o.list(cmd) },
	}
	return cli.Group(cmd, acquire, raw[0], raw[1], status, list, newLockHistoryCmd(o), newRevokeCmd(o, "lock", "job"))
}

// bindDurable binds --durable on an acquire command.
func bindDurable(cmd *cobra.Command, durable *bool) {
	cmd.Flags().BoolVar(durable, "durable", false,
		"keep the place in the queue across a leader change (needs --wait; retried with one request id until granted or the wait ends)")
}

// checkDurable refuses a --durable without a --wait: it would never queue.
func checkDurable(durable bool, wait time.Duration) error {
	if durable && wait <= 0 {
		return cli.Usagef("--durable keeps a waiter's place: give --wait too")
	}
	return nil
}

// durableRequestID is the request id of a raw acquire: one, for a durable
// waiter to be found again by; none otherwise (the server draws one).
func durableRequestID(durable bool) string {
	if !durable {
		return ""
	}
	var b [16]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// checkMode refuses a --mode the server would refuse.
func checkMode(mode string) error {
	if mode != wire.ModeShared && mode != wire.ModeExclusive {
		return cli.Usagef("--mode %q: want %s or %s", mode, wire.ModeShared, wire.ModeExclusive)
	}
	return nil
}

func (o *lockOptions) acquire(cmd *cobra.Command, name string) error {
	if err := o.session.validate(cmd); err != nil {
		return err
	}
	if err := checkMode(o.mode); err != nil {
		return err
	}
	if err := checkDurable(o.durable, o.wait); err != nil {
		return err
	}
	mode := ""
	if o.mode == wire.ModeShared {
		mode = wire.ModeShared
	}
	c, err := o.client.Client()
	if err != nil {
		return err
	}
	defer c.Close()
	if o.session.id != 0 {
		g, err := c.AcquireRaw(cmd.Context(), name, wire.AcquireRequest{Holder: o.holderOrDefault(), WaitMs: o.wait.Milliseconds(),
			LockDelayMillis: o.delay.Milliseconds(), Session: o.session.id, SessionLease: o.session.lease, Mode: mode,
			Durable: o.durable, RequestID: durableRequestID(o.durable)})
		if err != nil {
			return fmt.Errorf("acquire %q under session %d: %w", name, o.session.id, err)
		}
		return o.printAcquired(cmd, g.Token, g.Lease, g.TTLMillis, g)
	}
	lease, err := c.Acquire(cmd.Context(), name, append(o.durableOption(), client.TTL(o.ttl), client.Wait(o.wait), client.Holder(o.holder),
		client.LockDelay(o.delay), client.Mode(o.mode), client.NoKeepAlive())...)
	if err != nil {
		return fmt.Errorf("acquire %q: %w", name, err)
	}
	return o.acquired(cmd, lease, lease.Grant())
}

// durableOption is client.Durable with --durable.
func (o *lockOptions) durableOption() []client.AcquireOption {
	if o.durable {
		return []client.AcquireOption{client.Durable()}
	}
	return nil
}

func (o *lockOptions) renew(cmd *cobra.Command, name string) error {
	return callGrant(cmd, o, fmt.Sprintf("renew %q token %d", name, o.token),
		func(ctx context.Context, c *client.Client, token uint64, lease string) (wire.RenewResponse, error) {
			return c.RenewRaw(ctx, name, token, lease)
		},
		func(w io.Writer, out wire.RenewResponse) error { return printRenewed(w, out.Token, out.TTLMillis) })
}

func (o *lockOptions) release(cmd *cobra.Command, name string) error {
	return callGrant(cmd, o, fmt.Sprintf("release %q token %d", name, o.token),
		func(ctx context.Context, c *client.Client, token uint64, lease string) (wire.ReleaseResponse, error) {
			return c.ReleaseRaw(ctx, name, token, lease)
		},
		func(w io.Writer, out wire.ReleaseResponse) error { return printReleased(w, out.Token) })
}

func (o *lockOptions) status(cmd *cobra.Command, name string) error {
	return cli.Call(cmd, &o.client, fmt.Sprintf("status of %q", name),
		func(ctx context.Context, c *client.Client) (wire.LockStatus, error) { return c.Lock(ctx, name) },
		printStatus)
}

func (o *lockOptions) list(cmd *cobra.Command) error {
	return cli.Call(cmd, &o.client, "list locks",
		func(ctx context.Context, c *client.Client) (wire.LockList, error) {
			locks, err := c.Locks(ctx)
			return wire.LockList{Locks: orEmpty(locks)}, err
		},
		func(w io.Writer, list wire.LockList) error { return printEach(w, list.Locks, printStatus) })
}

// printStatus writes one line of key=value pairs.
func printStatus(w io.Writer, st wire.LockStatus) error {
	fields := []string{"lock=" + st.Lock, fmt.Sprintf("held=%t", st.Held)}
	if st.Held {
		fields = append(fields,
			fmt.Sprintf("holder=%q", st.Holder),
			fmt.Sprintf("token=%d", st.Token),
			fmt.Sprintf("ttl=%v", time.Duration(st.TTLMillis)*time.Millisecond))
		if st.RemainingMillis != nil {
			fields = append(fields, fmt.Sprintf("remaining=%v", time.Duration(*st.RemainingMillis)*time.Millisecond))
		}
	}
	if len(st.SharedHolders) > 0 {
		holders := make([]string, len(st.SharedHolders))
		for i, h := range st.SharedHolders {
			holders[i] = fmt.Sprintf("%q:%d", h.Holder, h.Token)
		}
		fields = append(fields, "mode=shared", "shared_holders="+strings.Join(holders, ","))
	}
	if st.DelayRemainingMillis != nil {
		fields = append(fields, fmt.Sprintf("lock_delay_remaining=%v", time.Duration(*st.DelayRemainingMillis)*time.Millisecond))
	}
	_, err := fmt.Fprintln(w, strings.Join(fields, " "))
	return err
}
