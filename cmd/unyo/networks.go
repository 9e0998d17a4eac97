package main

import (
	"errors"
	"fmt"
	"time"

	"connectrpc.com/connect"
	"github.com/spf13/cobra"

	"github.com/unyo-ops/unyo/core/api/unyov1"
	"github.com/unyo-ops/unyo/core/printer"
)

// addNetworkCommands makes `unyo networks get` the detail view (usage and
// who holds each address) and adds `allocate` and `release`, IPAM by hand
// for operators and tests.
func addNetworkCommands(g *globals, cmd *cobra.Command) {
	for _, c := range cmd.Commands() {
		if c.Name() != "get" {
			continue
		}
		c.Use = "get NAME"
		c.Short = "Show a network with its usage and who holds each address (node-local/NODE for a node's port namespaces)"
		c.RunE = func(cmd *cobra.Command, args []string) error {
			cl, ctx, cancel, err := g.connect(cmd)
			if err != nil {
				return err
			}
			defer cancel()
			resp, err := cl.Objects.Get(ctx, connect.NewRequest(&unyov1.GetRequest{Ref: &unyov1.ObjectRef{Kind: "Network", Name: args[0]}}))
			if err != nil {
				return g.explain(err)
			}
			return printer.NetworkDetails(cmd.OutOrStdout(), g.output, resp.Msg.GetObjects())
		}
	}
	var holder string
	allocate := &cobra.Command{
		Use:   "allocate NETWORK --holder HOLDER",
		Short: "Allocate an address of a network to a holder (the one it holds already, if any)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if holder == "" {
				return errors.New("say who holds the address: --holder (such as compute/web-0/eth0)")
			}
			cl, ctx, cancel, err := g.connect(cmd)
			if err != nil {
				return err
			}
			defer cancel()
			resp, err := cl.Networks.AllocateAddress(ctx, connect.NewRequest(&unyov1.AllocateAddressRequest{Network: args[0], Holder: holder}))
			if err != nil {
				return g.explain(err)
			}
			a := resp.Msg.GetAllocation()
			fmt.Fprintf(cmd.OutOrStdout(), "%s\n", a.GetAddress())
			fmt.Fprintf(cmd.ErrOrStderr(), "network %s: %s is held by %s\n", a.GetNetwork(), a.GetAddress(), a.GetHolder())
			return nil
		},
	}
	allocate.Flags().StringVar(&holder, "holder", "", "who holds the address (required)")
	var relHolder string
	release := &cobra.Command{
		Use:   "release NETWORK (ADDRESS | --holder HOLDER)",
		Short: "Release an address; it is allocated again only after root's quarantine",
		Args:  cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			req := &unyov1.ReleaseAddressRequest{Network: args[0], Holder: relHolder}
			if len(args) == 2 {
				req.Address = args[1]
			}
			if (req.Address == "") == (req.Holder == "") {
				return errors.New("name the address to release, or its holder with --holder, not both")
			}
			cl, ctx, cancel, err := g.connect(cmd)
			if err != nil {
				return err
			}
			defer cancel()
			resp, err := cl.Networks.ReleaseAddress(ctx, connect.NewRequest(req))
			if err != nil {
				return g.explain(err)
			}
			a := resp.Msg.GetAllocation()
			fmt.Fprintf(cmd.OutOrStdout(), "network %s: %s released by %s; in quarantine until %s\n", a.GetNetwork(), a.GetAddress(), a.GetHolder(),
				a.GetReusableAt().AsTime().UTC().Format(time.RFC3339))
			return nil
		},
	}
	release.Flags().StringVar(&relHolder, "holder", "", "release the address this holder holds")
	cmd.AddCommand(allocate, release)
}
