package clientcmd

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/fencer-io/fencer/api/client"
	"github.com/fencer-io/fencer/api/wire"
	"github.com/fencer-io/fencer/cmd/fencer/internal/cli"
)

// watchOptions are the flags of "fencer watch".
type watchOptions struct {
	client cli.ClientFlags
	since  indexFlag
}

// NewWatchCmd returns "fencer watch": the cluster's events as they happen.
func NewWatchCmd() *cobra.Command {
	o := &watchOptions{}
	cmd := &cobra.Command{
		Use:   "watch [PREFIX]",
		Short: "Print lock, key and member events as they happen, one line each",
		Long: `Print the cluster's events as they happen, one line each, in log order:
acquired, released, expired, handed_off, voided, put, key_deleted,
member_added, member_removed, epoch (and types added later, printed as they
come). With PREFIX, only locks and keys whose names start with it.

Without --since the watch starts now; --since N prints every event after log
index N first (the Fencer-Index of a list, or the index of the last event
you saw). When a member goes away the watch resumes on another, missing and
repeating nothing. It runs until interrupted; if the members no longer keep
the events after --since, it fails with events_compacted and the index to
list again at.`,
		Example: `  fencer watch                        # everything, from now on
  fencer watch jobs.                  # locks and keys named jobs.*
  fencer watch --since 1200 -o json   # JSON Lines, from after index 1200
  fencer watch -o json | jq -c 'select(.type == "expired")'`,
		Args: func(c *cobra.Command, args []string) error {
			if len(args) > 1 {
				return cli.Usagef("unexpected argument %q: %s", args[1], c.UseLine())
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			prefix := ""
			if len(args) == 1 {
				prefix = args[0]
			}
			since := client.FromNow
			if cmd.Flags().Changed("since") {
				since = uint64(o.since)
			}
			return o.run(cmd, prefix, since)
		},
	}
	o.client.Bind(cmd.Flags())
	cmd.Flags().Var(&o.since, "since", "print the events after this log index first (default: from now)")
	return cmd
}

func (o *watchOptions) run(cmd *cobra.Command, prefix string, since uint64) error {
	c, err := o.client.Client()
	if err != nil {
		return err
	}
	defer c.Close()
	ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	out := cmd.OutOrStdout()
	for ev, err := range c.Watch(ctx, prefix, since) {
		if err != nil {
			if ctx.Err() != nil {
				return nil // interrupted: the normal end of a watch
			}
			var api *client.APIError
			if errors.Is(err, client.ErrEventsCompacted) && errors.As(err, &api) {
				return fmt.Errorf("%w; list again and watch with --since %d", err, api.Index)
			}
			return err
		}
		if err := printEvent(out, ev, o.client.JSON()); err != nil {
			return err
		}
	}
	return nil
}

// printEvent writes one event as one line: JSON, or the fields it has as
// name=value.
func printEvent(w io.Writer, ev wire.Event, asJSON bool) error {
	if asJSON {
		b, err := json.Marshal(ev)
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(w, "%s\n", b)
		return err
	}
	fields := []string{fmt.Sprintf("index=%d", ev.Index), ev.Type}
	add := func(name, v string) {
		if v != "" {
			fields = append(fields, name+"="+v)
		}
	}
	num := func(n uint64) string {
		if n == 0 {
			return ""
		}
		return strconv.FormatUint(n, 10)
	}
	quoted := func(s string) string {
		if s == "" {
			return ""
		}
		return strconv.Quote(s)
	}
	add("lock", ev.Lock)
	add("key", ev.Key)
	add("holder", quoted(ev.Holder))
	add("token", num(ev.Token))
	add("prev_holder", quoted(ev.PrevHolder))
	add("prev_token", num(ev.PrevToken))
	add("reason", ev.Reason)
	if ev.ValueSize != nil {
		add("value_size", strconv.Itoa(*ev.ValueSize))
	}
	add("member", ev.Member)
	add("epoch", num(ev.Epoch))
	_, err := fmt.Fprintln(w, strings.Join(fields, " "))
	return err
}

// indexFlag is a log index, read as the API reads since: a decimal integer
// ≥ 0, so that "010" is 10, not octal 8 as pflag's Uint64 would read it.
type indexFlag uint64

func (f *indexFlag) String() string { return strconv.FormatUint(uint64(*f), 10) }

func (f *indexFlag) Set(s string) error {
	v, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return errors.New("want a log index, a decimal integer ≥ 0")
	}
	*f = indexFlag(v)
	return nil
}

func (f *indexFlag) Type() string { return "N" }
