package opscmd

import (
	"fmt"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/fencer-io/fencer/cmd/fencer/internal/cli"
	"github.com/fencer-io/fencer/internal/tlsutil"
)

// tlsInitOptions are the flags of "fencer tls init".
type tlsInitOptions struct {
	nodes []string
	hosts []string
}

// NewTLSCmd returns "fencer tls": the development PKI.
func NewTLSCmd() *cobra.Command {
	o := &tlsInitOptions{}
	cmd := &cobra.Command{
		Use:     "tls",
		Short:   "Certificates for TLS between clients and nodes",
		Example: `  fencer tls init ./pki --nodes n1,n2,n3 --hosts 10.0.0.1,10.0.0.2,10.0.0.3`,
	}
	initCmd := &cobra.Command{
		Use:   "init DIR [--nodes n1,n2,n3] [--hosts HOST,…]",
		Short: "Write a development CA, a certificate per node and a client certificate into DIR",
		Long: `Write a development CA (ca.pem, ca-key.pem), a certificate per node (NODE.pem,
NODE-key.pem: server and client use, for the API, forwarding and Raft) and a
client-only certificate (client.pem, client-key.pem) into DIR. Every
certificate names 127.0.0.1, ::1 and localhost plus --hosts: list each
address or DNS name by which nodes are reached. Keep ca-key.pem offline.`,
		Example: `  fencer tls init ./pki
  fencer tls init ./pki --nodes n1,n2,n3 --hosts 10.0.0.1,10.0.0.2,10.0.0.3,fencer.internal

  # then, on n1 and from a client
  fencer serve --id n1 --tls-cert pki/n1.pem --tls-key pki/n1-key.pem --tls-ca pki/ca.pem ...
  fencer lock list --endpoints https://10.0.0.1:7001 --tls-ca pki/ca.pem \
    --tls-cert pki/client.pem --tls-key pki/client-key.pem`,
		Args: cli.Positional("DIR"),
		RunE: func(cmd *cobra.Command, args []string) error { return o.run(cmd, args[0]) },
	}
	initCmd.Flags().StringSliceVar(&o.nodes, "nodes", []string{"n1", "n2", "n3"}, "node names, one certificate each")
	initCmd.Flags().StringSliceVar(&o.hosts, "hosts", nil, "extra IP addresses and DNS names for the certificates")
	return cli.Group(cmd, initCmd)
}

func (o *tlsInitOptions) run(cmd *cobra.Command, dir string) error {
	if err := tlsutil.GenerateDevPKI(dir, o.nodes, o.hosts); err != nil {
		return err
	}
	out := cmd.OutOrStdout()
	fmt.Fprintf(out, "wrote a development CA and certificates for %v and a client to %s\n", o.nodes, dir)
	fmt.Fprintf(out, "node flags: --tls-cert %s --tls-key %s --tls-ca %s\n",
		filepath.Join(dir, o.nodes[0]+".pem"), filepath.Join(dir, o.nodes[0]+"-key.pem"), filepath.Join(dir, tlsutil.CAFile))
	return nil
}
