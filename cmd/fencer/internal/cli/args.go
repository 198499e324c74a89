package cli

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"
)

// Group makes cmd a command that holds subcommands. Run bare, it prints its
// help; run with a word that is not one of its subcommands, it fails with
// "unknown command" and a suggestion (cobra would print the help and exit 0,
// so that a typo in a script went unnoticed). The same holds when flags of
// the mistyped subcommand follow: cobra parses them as the group's flags
// first and would report only "unknown flag: --ttl".
func Group(cmd *cobra.Command, subs ...*cobra.Command) *cobra.Command {
	cmd.Args = func(c *cobra.Command, args []string) error {
		if len(args) == 0 {
			return nil
		}
		return unknownCommand(c, args[0])
	}
	cmd.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		// pflag keeps the words it met before the failing flag: the first
		// is the subcommand the user meant, which cobra did not find. The
		// group's subcommands inherit this function; theirs are flag
		// errors only.
		if args := c.Flags().Args(); len(args) > 0 && c.HasSubCommands() {
			return unknownCommand(c, args[0])
		}
		return Usage(err)
	})
	cmd.RunE = func(c *cobra.Command, _ []string) error { return c.Help() }
	cmd.AddCommand(subs...)
	return cmd
}

// unknownCommand is the refusal of word as a subcommand of c, with cobra's
// suggestion when one is close.
func unknownCommand(c *cobra.Command, word string) error {
	hint := ""
	if c.SuggestionsMinimumDistance <= 0 {
		c.SuggestionsMinimumDistance = 2 // cobra's default, set only where cobra suggests
	}
	switch s := c.SuggestionsFor(word); len(s) {
	case 0:
	case 1:
		hint = fmt.Sprintf(" (did you mean %q?)", s[0])
	default:
		// Every close one: cobra lists them in command order, not by
		// distance, so the first may be the farther ("eec": dev, exec).
		hint = fmt.Sprintf(" (did you mean one of %q?)", s)
	}
	return Usagef("unknown command %q for %q%s; %q lists its commands", word, c.CommandPath(), hint, c.CommandPath()+" --help")
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
