package clientcmd

import (
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/fencer-io/fencer/api/client"
	"github.com/fencer-io/fencer/api/wire"
	"github.com/fencer-io/fencer/cmd/fencer/internal/cli"
)

// tokenOptions are the flags of "fencer token".
type tokenOptions struct {
	client cli.ClientFlags
}

// NewTokenCmd returns "fencer token": whose grant a fencing token was.
func NewTokenCmd() *cobra.Command {
	o := &tokenOptions{}
	cmd := &cobra.Command{
		Use:   "token T",
		Short: "Show which lock (or semaphore) and holder got fencing token T, and how the grant ended",
		Long: `Show which lock, or for a permit which semaphore, and holder got fencing
token T, the log index of the grant, and how it ended (released, expired,
handed_off, voided) or held: the answer to "whose write was this?" for a
resource that saw token T.

The cluster keeps its last --grant-history grants (100,000 by default),
locks' and permits' alike; a token older than that, or never a grant, fails
with unknown_token and says which. Any member answers from its own applied
state.`,
		Example: `  fencer token 1234
  fencer token 1234 -o json | jq -r .holder`,
		Args: cli.Positional("T"),
		RunE: func(cmd *cobra.Command, args []string) error { return o.run(cmd, args[0]) },
	}
	o.client.Bind(cmd.Flags())
	return cmd
}

func (o *tokenOptions) run(cmd *cobra.Command, arg string) error {
	token, ok := wire.ParseToken(arg)
	if !ok {
		return cli.Usagef("token %q: want a positive decimal integer", arg)
	}
	c, err := o.client.Client()
	if err != nil {
		return err
	}
	defer c.Close()
	g, err := c.Token(cmd.Context(), token)
	var apiErr *client.APIError
	if errors.Is(err, client.ErrUnknownToken) && errors.As(err, &apiErr) {
		return fmt.Errorf("token %d (%s): %w", token, apiErr.Reason, err)
	}
	if err != nil {
		return fmt.Errorf("token %d: %w", token, err)
	}
	if o.client.JSON() {
		return cli.WriteJSON(cmd.OutOrStdout(), g)
	}
	return printGrant(cmd.OutOrStdout(), g, true)
}
