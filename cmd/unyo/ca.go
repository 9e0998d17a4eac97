package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/unyo-ops/unyo/core/identity"
)

// newCACommand makes node CAs: a cluster with cluster.node_ca signs its
// nodes' client certificates with one.
func newCACommand() *cobra.Command {
	cmd := &cobra.Command{Use: "ca", Short: "Certificate authorities for node identity (mTLS)"}
	var dir, name string
	create := &cobra.Command{
		Use:   "create --dir DIR [--name NAME]",
		Short: "Write a new node CA (ca.crt, and ca.key readable only by you) for cluster.node_ca",
		Long: `Write a new CA certificate and key into DIR as ca.crt and ca.key (0600).
Set them as cluster.node_ca.cert_file and key_file on every replica of one
cluster; the cluster then signs a client certificate for every node that
enrols over TLS, and verifies them (server.tls.client_ca_file defaults to
ca.crt). Keep ca.key secret: whoever has it can act as any node.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if dir == "" {
				return fmt.Errorf("--dir is required: the directory to write ca.crt and ca.key into")
			}
			certFile, keyFile, err := identity.CreateCA(dir, name)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "cluster:\n  node_ca:\n    cert_file: %s\n    key_file: %s\n", certFile, keyFile)
			return nil
		},
	}
	create.Flags().StringVar(&dir, "dir", "", "directory to write ca.crt and ca.key into (created 0700 if missing)")
	create.Flags().StringVar(&name, "name", "", `the CA's common name (default "unyo node CA")`)
	cmd.AddCommand(create)
	return cmd
}
