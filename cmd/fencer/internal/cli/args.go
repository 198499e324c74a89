package cli

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"
)

// Group makes cmd a command that holds subcommands. Run bare, it prints its
// help; run with a word that is not one of its subcommands, it fails with
// "unknown command" (cobra would print the help and exit 0, so that a typo
// in a script went unnoticed).
func Group(cmd *cobra.Command, subs ...*cobra.Command) *cobra.Command {
	cmd.Args = func(c *cobra.Command, args []string) error {
		if len(args) == 0 {
			return nil
		}
		hint := ""
		if c.SuggestionsMinimumDistance <= 0 {
			c.SuggestionsMinimumDistance = 2 // cobra's default, set only where cobra suggests
		}
		if s := c.SuggestionsFor(args[0]); len(s) > 0 {
			hint = fmt.Sprintf(" (did you mean %q?)", s[0])
		}
		return Usagef("unknown command %q for %q%s; %q lists its commands", args[0], c.CommandPath(), hint, c.CommandPath()+" --help")
	}
	cmd.RunE = func(c *cobra.Command, _ []string) error { return c.Help() }
	cmd.AddCommand(subs...)
	return cmd
}

// Positional checks that a command got exactly the named arguments, and names
// the first one missing: Positional("NAME") says "NAME is required".
func Positional(names ...string) cobra.PositionalArgs {
	return func(c *cobra.Command, args []string) error {
		if missing := names[min(len(args), len(names)):]; len(missing) > 0 {
			verb := "is"
			if len(missing) > 1 {
				verb = "are"
			}
			return Usagef("%s %s required: %s", strings.Join(missing, " and "), verb, c.UseLine())
		}
		if len(args) > len(names) {
			return Usagef("unexpected argument %q: %s", args[len(names)], c.UseLine())
		}
		return nil
	}
}

// Optional checks that a command got at most the named arguments.
func Optional(names ...string) cobra.PositionalArgs {
	return func(c *cobra.Command, args []string) error {
		if len(args) > len(names) {
			return Usagef("unexpected argument %q: %s", args[len(names)], c.UseLine())
		}
		return nil
	}
}
