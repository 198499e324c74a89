package cli

import (
	"context"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/fencer-io/fencer/api/client"
)

// Call is the body of most client commands: it makes one request with a
// client from f and prints its answer, as JSON under -o json and else with
// text. A failed request's error is prefixed with what.
func Call[T any](cmd *cobra.Command, f *ClientFlags, what string, do func(context.Context, *client.Client) (T, error), text func(io.Writer, T) error) error {
	c, err := f.Client()
	if err != nil {
		return err
	}
	defer c.Close()
	v, err := do(cmd.Context(), c)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	if f.JSON() {
		return WriteJSON(cmd.OutOrStdout(), v)
	}
	return text(cmd.OutOrStdout(), v)
}
