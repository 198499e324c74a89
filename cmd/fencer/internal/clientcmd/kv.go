package clientcmd

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/fencer-io/fencer/api/client"
	"github.com/fencer-io/fencer/api/wire"
	"github.com/fencer-io/fencer/cmd/fencer/internal/cli"
)

// kvOptions are the flags of "fencer kv" and its subcommands.
type kvOptions struct {
	client cli.ClientFlags
	token  uint64
	lock   string
}

// KVValue is "fencer kv get -o json". Value is a string: binary values are
// better read in text mode, which writes the raw bytes.
type KVValue struct {
	Key   string `json:"key"`
	Token uint64 `json:"token"`
	Value string `json:"value"`
}

// NewKVCmd returns "fencer kv": fenced writes and reads of the cluster's
// built-in key-value store.
func NewKVCmd() *cobra.Command {
	o := &kvOptions{}
	cmd := &cobra.Command{
		Use:   "kv",
		Short: "Write, read and delete fenced keys",
		Example: `  fencer kv put config v2 --token "$token" --lock job
  fencer kv get config
  fencer kv delete config`,
	}
	o.client.Bind(cmd.PersistentFlags())
	put := &cobra.Command{
		Use:   "put KEY VALUE --token N [--lock NAME]",
		Short: "Write VALUE (- reads stdin) under KEY if N is above the key's last token",
		Example: `  # $token as printed by "fencer lock acquire job"
  fencer kv put config v2 --token "$token" --lock job
  tar c ./state | fencer kv put state - --token "$token"`,
		Args: cli.Positional("KEY", "VALUE"),
		RunE: func(cmd *cobra.Command, args []string) error { return o.put(cmd, args[0], args[1]) },
	}
	put.Flags().Var((*cli.TokenFlag)(&o.token), "token", "fencing token of your grant (required)")
	put.Flags().StringVar(&o.lock, "lock", "", "also require that the token is this lock's current grant")
	get := &cobra.Command{
		Use:   "get KEY",
		Short: "Print a key's value (its token goes to stderr, or into -o json)",
		Example: `  fencer kv get config
  fencer kv get config -o json | jq -r .token`,
		Args: cli.Positional("KEY"),
		RunE: func(cmd *cobra.Command, args []string) error { return o.get(cmd, args[0]) },
	}
	del := &cobra.Command{
		Use:   "delete KEY",
		Short: "Remove KEY and its last token, so that any token writes it again (operators)",
		Long: `Remove a fenced key and its last token through the log. The next fenced
write to it is accepted whatever its token, a stale holder's too: this is the
way out of a last token that no real holder can pass (one written before the
cluster refused tokens it never issued). It needs the operator role when the
cluster has an ACL, and is audited.`,
		Example: `  fencer kv delete report
  fencer kv delete report -o json | jq .last_token`,
		Args: cli.Positional("KEY"),
		RunE: func(cmd *cobra.Command, args []string) error { return o.delete(cmd, args[0]) },
	}
	return cli.Group(cmd, put, get, del)
}

func (o *kvOptions) delete(cmd *cobra.Command, key string) error {
	c, err := o.client.Client()
	if err != nil {
		return err
	}
	defer c.Close()
	res, err := c.DeleteKey(cmd.Context(), key)
	if err != nil {
		return fmt.Errorf("delete %q: %w", key, err)
	}
	if o.client.JSON() {
		return cli.WriteJSON(cmd.OutOrStdout(), res)
	}
	_, err = fmt.Fprintf(cmd.OutOrStdout(), "deleted key=%s last_token=%d\n", res.Key, res.LastToken)
	return err
}

func (o *kvOptions) put(cmd *cobra.Command, key, value string) error {
	if o.token == 0 {
		return cli.Usagef("--token is required: the fencing token of your grant")
	}
	c, err := o.client.Client()
	if err != nil {
		return err
	}
	defer c.Close()
	data := []byte(value)
	if value == "-" {
		if data, err = io.ReadAll(io.LimitReader(cmd.InOrStdin(), wire.MaxBodyBytes+1)); err != nil {
			return fmt.Errorf("reading stdin: %w", err)
		}
	}
	var opts []client.PutOption
	if o.lock != "" {
		opts = append(opts, client.WithLock(o.lock))
	}
	if err := c.PutFenced(cmd.Context(), key, data, o.token, opts...); err != nil {
		return fmt.Errorf("put %q with token %d: %w", key, o.token, err)
	}
	if o.client.JSON() {
		return cli.WriteJSON(cmd.OutOrStdout(), wire.PutResponse{Key: key, Token: o.token})
	}
	_, err = fmt.Fprintf(cmd.OutOrStdout(), "key=%s token=%d\n", key, o.token)
	return err
}

func (o *kvOptions) get(cmd *cobra.Command, key string) error {
	c, err := o.client.Client()
	if err != nil {
		return err
	}
	defer c.Close()
	value, token, err := c.Get(cmd.Context(), key)
	if err != nil {
		return fmt.Errorf("get %q: %w", key, err)
	}
	if o.client.JSON() {
		return cli.WriteJSON(cmd.OutOrStdout(), KVValue{Key: key, Token: token, Value: string(value)})
	}
	if _, err := cmd.OutOrStdout().Write(value); err != nil {
		return err
	}
	_, err = fmt.Fprintf(cmd.ErrOrStderr(), "token=%d\n", token)
	return err
}
