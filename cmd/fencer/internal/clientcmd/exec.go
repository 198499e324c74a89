package clientcmd

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/fencer-io/fencer/api/client"
	"github.com/fencer-io/fencer/api/wire"
	"github.com/fencer-io/fencer/cmd/fencer/internal/cli"
)

// ExitLeaseLost is the exit status of "fencer exec" when the lease was lost
// while the command ran: EX_TEMPFAIL of sysexits.h, "try again later".
const ExitLeaseLost = 75

// execOptions are the flags of "fencer exec".
type execOptions struct {
	client cli.ClientFlags
	ttl    time.Duration
	wait   time.Duration
	delay  time.Duration
	limit  int    // > 0: hold one of limit permits of the semaphore NAME instead
	elect  bool   // "fencer elect": campaign until elected, publishing value
	value  string // the value an elected leader publishes
	grace  time.Duration
	holder string
	mode   string // shared or exclusive, for the lock NAME
}

func (o *execOptions) validate() error {
	if o.mode != "" {
		if err := checkMode(o.mode); err != nil {
			return err
		}
		if o.mode == wire.ModeShared && o.limit > 0 {
			return cli.Usagef("--mode shared is a lock's: a semaphore's permit (--limit) has no mode")
		}
	}
	if o.grace < 0 {
		return cli.Usagef("--grace %v: want a duration of 0 or more", o.grace)
	}
	if o.limit < 0 || o.limit > wire.MaxSemaphoreLimit {
		return cli.Usagef("--limit %d: want 1 to %d", o.limit, wire.MaxSemaphoreLimit)
	}
	return o.client.Validate()
}

// NewExecCmd returns "fencer exec", which runs a command while holding a
// lock and stops it when the lock can no longer be trusted.
func NewExecCmd() *cobra.Command {
	o := &execOptions{}
	cmd := execCommand(o)
	fs := cmd.Flags()
	fs.DurationVar(&o.wait, "wait", 0, "queue this long if the lock is held (0: fail at once)")
	fs.IntVar(&o.limit, "limit", 0, "run under one of N permits of the semaphore NAME instead of the lock NAME (consul lock -n)")
	fs.DurationVar(&o.delay, "lock-delay", 0, "if the lease is lost to expiry, nobody can acquire the lock (with --limit, the permit's slot) for this long (at most 1m)")
	fs.StringVar(&o.mode, "mode", wire.ModeExclusive, "hold the lock shared (beside other shared holders; a reader) or exclusive")
	return cmd
}

// execCommand is "fencer exec" and "fencer elect" without the flags only
// one of them has.
func execCommand(o *execOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "exec NAME [flags] -- COMMAND [ARGS...]",
		Short: "Run a command while holding a lock; stop it if the lease is lost",
		Long: `Acquire the lock NAME, keep its lease alive, and run COMMAND with
FENCER_TOKEN (the fencing token), FENCER_LOCK and FENCER_ENDPOINTS added to
its environment. Pass $FENCER_TOKEN with every write the lock protects.

With --limit N, NAME is a semaphore and the command runs under one of its N
permits (FENCER_SEMAPHORE is set too); FENCER_TOKEN is the permit's own
token, and the lease is kept, lost and released exactly as a lock's.

SIGINT, SIGTERM and SIGHUP are forwarded to the command. When the command
exits, the lock is released and fencer exits with the command's status
(128+N if it was killed by signal N).

If the lease is lost (a renewal is refused, or none could be confirmed in
time), the command's process group gets SIGTERM, then SIGKILL after --grace,
and fencer exits with status 75. The command runs in its own process group so
that its children are stopped too; it therefore cannot read from the terminal.

With -o json, fencer's own errors go to stderr as JSON, and once COMMAND has
run, fencer writes one line to stdout after COMMAND's output:
{"lock":…,"token":…,"exit_code":…,"lease_lost":…}, exit_code being
COMMAND's status.`,
		Example: `  fencer exec nightly-report -- ./report.sh --date today
  fencer exec migrate --ttl 30s --wait 5m -- ./migrate.sh
  fencer exec crawlers --limit 3 --wait 1m -- ./crawl.sh   # one of 3 permits
  fencer exec job -o json -- ./batch.sh | tail -n 1 | jq .exit_code

  # the command passes the token with every write the lock protects
  fencer exec job -- sh -c 'fencer kv put state "$(date)" --token "$FENCER_TOKEN" --lock "$FENCER_LOCK"'`,
		Args: func(cmd *cobra.Command, args []string) error {
			switch dash := cmd.ArgsLenAtDash(); {
			case len(args) == 0 || dash == 0:
				return cli.Usagef("NAME is required: %s", cmd.UseLine())
			case len(args) == 1:
				return cli.Usagef("COMMAND is required after --: %s", cmd.UseLine())
			case dash != -1 && dash != 1:
				return cli.Usagef("unexpected argument %q before --: %s", args[1], cmd.UseLine())
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := o.validate(); err != nil {
				return err
			}
			return o.run(cmd, args[0], args[1:])
		},
	}
	fs := cmd.Flags()
	o.client.Bind(fs)
	fs.DurationVar(&o.ttl, "ttl", wire.DefaultTTL, "lease time to live; renewed about every ttl/3")
	fs.DurationVar(&o.grace, "grace", 5*time.Second, "time between SIGTERM and SIGKILL when the lease is lost")
	fs.StringVar(&o.holder, "holder", "", "holder name shown in lock status (default hostname-pid)")
	return cmd
}

func (o *execOptions) run(cmd *cobra.Command, name string, argv []string) error {
	c, err := o.client.Client()
	if err != nil {
		return err
	}
	defer c.Close()
	// Registered before the acquire, so that a signal from here on is ours
	// to handle: it aborts the acquire, or is forwarded to the command.
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	defer signal.Stop(sigs)

	lease, err := o.acquire(cmd.Context(), c, name, sigs)
	if err != nil {
		return err
	}
	child := exec.Command(argv[0], argv[1:]...)
	child.Env = append(os.Environ(),
		"FENCER_TOKEN="+strconv.FormatUint(lease.Token(), 10),
		"FENCER_LOCK="+name,
		"FENCER_ENDPOINTS="+strings.Join(o.client.EndpointList(), ","),
	)
	if o.limit > 0 {
		child.Env = append(child.Env, "FENCER_SEMAPHORE="+name)
	}
	child.Stdin, child.Stdout, child.Stderr = cmd.InOrStdin(), cmd.OutOrStdout(), cmd.ErrOrStderr()
	child.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	// Output copied through pipes (when fencer's own is not a file) must not
	// hold fencer up after the command exits, if a leftover child of its
	// keeps the pipe open.
	child.WaitDelay = time.Second
	if err := child.Start(); err != nil {
		o.release(lease)
		code := 126
		if errors.Is(err, exec.ErrNotFound) || errors.Is(err, fs.ErrNotExist) {
			code = 127
		}
		o.report(cmd, lease, code, false)
		return &cli.ExitError{Code: code, Kind: cli.CodeCannotRun, Err: fmt.Errorf("exec %s: %w", argv[0], err)}
	}
	pgid := child.Process.Pid
	exited := make(chan struct{})
	go func() {
		child.Wait()
		close(exited)
	}()
	for {
		select {
		case s := <-sigs:
			syscall.Kill(-pgid, s.(syscall.Signal))
		case <-exited:
			return o.finish(cmd, lease, argv[0], child.ProcessState)
		case <-lease.Done():
			err := o.terminate(lease, pgid, exited, sigs)
			o.report(cmd, lease, exitStatus(child.ProcessState), true)
			return err
		}
	}
}

// acquire takes the lock; a signal meanwhile abandons the attempt.
func (o *execOptions) acquire(ctx context.Context, c *client.Client, name string, sigs <-chan os.Signal) (*client.Lease, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	type result struct {
		lease *client.Lease
		err   error
	}
	done := make(chan result, 1)
	go func() {
		var l *client.Lease
		var err error
		switch {
		case o.elect:
			l, err = c.Campaign(ctx, name, o.value, client.TTL(o.ttl), client.Holder(o.holder))
		case o.limit > 0:
			l, err = c.AcquirePermit(ctx, name, o.limit, client.TTL(o.ttl), client.Wait(o.wait), client.Holder(o.holder), client.LockDelay(o.delay))
		default:
			l, err = c.Acquire(ctx, name, client.TTL(o.ttl), client.Wait(o.wait), client.Holder(o.holder), client.LockDelay(o.delay), client.Mode(o.mode))
		}
		done <- result{l, err}
	}()
	select {
	case r := <-done:
		if r.err != nil {
			return nil, fmt.Errorf("acquire %q: %w", name, r.err)
		}
		return r.lease, nil
	case s := <-sigs:
		cancel()
		if r := <-done; r.lease != nil {
			o.release(r.lease)
		}
		return nil, &cli.ExitError{Code: 128 + int(s.(syscall.Signal)), Kind: cli.CodeInterrupted, Err: fmt.Errorf("acquire %q: interrupted by %v", name, s)}
	}
}

// finish handles the command's own exit: release, and pass its status on.
func (o *execOptions) finish(cmd *cobra.Command, lease *client.Lease, prog string, ps *os.ProcessState) error {
	code := exitStatus(ps)
	err := o.release(lease)
	lost := errors.Is(err, client.ErrLeaseLost) || errors.Is(err, client.ErrLeaseExpired)
	o.report(cmd, lease, code, lost)
	if lost {
		return &cli.ExitError{Code: ExitLeaseLost, Err: fmt.Errorf("lease on %q lost (%w) before %s exited with status %d", lease.Name(), err, prog, code)}
	}
	if err != nil {
		// The command is done; the lease will expire on its own.
		fmt.Fprintf(cmd.ErrOrStderr(), "fencer: release of %q failed (%s); it expires within %v\n", lease.Name(), cli.OneLine(err), lease.TTL())
	}
	if code != 0 {
		return &cli.ExitError{Code: code, Kind: cli.CodeCommandFailed, Err: fmt.Errorf("%s exited with status %d", prog, code)}
	}
	return nil
}

func (o *execOptions) release(lease *client.Lease) error {
	ctx, cancel := context.WithTimeout(context.Background(), o.client.Timeout)
	defer cancel()
	return lease.Release(ctx)
}

// terminate stops the command's process group after the lease was lost:
// SIGTERM, then SIGKILL once the grace period is over.
func (o *execOptions) terminate(lease *client.Lease, pgid int, exited <-chan struct{}, sigs <-chan os.Signal) error {
	why := lease.Err()
	syscall.Kill(-pgid, syscall.SIGTERM)
	grace := time.NewTimer(o.grace)
	defer grace.Stop()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	killed := false
	for done := false; !done; {
		select {
		case s := <-sigs:
			syscall.Kill(-pgid, s.(syscall.Signal))
		case <-grace.C:
			syscall.Kill(-pgid, syscall.SIGKILL)
			killed = true
			<-exited
			done = true
		case <-tick.C:
			// Wait for the whole group, not just its leader: a leftover
			// child could still act on the lost lock.
			select {
			case <-exited:
				done = syscall.Kill(-pgid, 0) == syscall.ESRCH
			default:
			}
		}
	}
	how := "child terminated"
	if killed {
		how = fmt.Sprintf("child killed after %v grace", o.grace)
	}
	return &cli.ExitError{Code: ExitLeaseLost, Err: fmt.Errorf("lease on %q lost (%w); %s", lease.Name(), why, how)}
}

// ExecReport is what "fencer exec -o json" prints once COMMAND has run.
type ExecReport struct {
	Lock      string `json:"lock"`
	Token     uint64 `json:"token"`
	ExitCode  int    `json:"exit_code"`  // COMMAND's status, 128+N if killed by signal N
	LeaseLost bool   `json:"lease_lost"` // fencer then exits 75
}

// report writes the -o json summary on one line: COMMAND's own output comes
// first on the same stdout, and a reader takes the last line.
func (o *execOptions) report(cmd *cobra.Command, lease *client.Lease, code int, lost bool) {
	if !o.client.JSON() {
		return
	}
	b, _ := json.Marshal(ExecReport{Lock: lease.Name(), Token: lease.Token(), ExitCode: code, LeaseLost: lost}) // cannot fail: plain fields
	fmt.Fprintf(cmd.OutOrStdout(), "%s\n", b)
}

// exitStatus is the shell's view of how a process ended.
func exitStatus(ps *os.ProcessState) int {
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ps.ExitCode()
}
