package main

import (
	"fmt"
	"time"

	"connectrpc.com/connect"
	"github.com/spf13/cobra"

	"github.com/unyo-ops/unyo/core/api/unyov1"
	"github.com/unyo-ops/unyo/core/printer"
	"github.com/unyo-ops/unyo/provision/inventory"
)

// addResourceCommands gives `unyo resources ls` the hardware refresh
// listing: --contract-ends-before DATE lists, by rack, the resources whose
// maintenance contract ends before DATE. The filter runs here, not at
// root: the list request has no filters, an inventory is tens of
// thousands of objects at most, and the per-rack totals need every
// resource of a rack anyway.
func addResourceCommands(g *globals, cmd *cobra.Command) {
	ls, _, err := cmd.Find([]string{"ls"})
	if err != nil || ls == cmd {
		return
	}
	var before string
	list := ls.RunE
	ls.RunE = func(cmd *cobra.Command, args []string) error {
		if before == "" {
			return list(cmd, args)
		}
		day, err := time.Parse(inventory.DateLayout, before)
		if err != nil {
			return fmt.Errorf("--contract-ends-before %q: expected a date, YYYY-MM-DD", before)
		}
		cl, ctx, cancel, err := g.connect(cmd)
		if err != nil {
			return err
		}
		defer cancel()
		resp, err := cl.Objects.List(ctx, connect.NewRequest(&unyov1.ListRequest{Kind: "PhysicalResource"}))
		if err != nil {
			return g.explain(err)
		}
		var all []*unyov1.PhysicalResource
		for _, o := range resp.Msg.GetObjects() {
			if p := o.GetPhysicalResource(); p != nil {
				all = append(all, p)
			}
		}
		return printer.Refresh(cmd.OutOrStdout(), g.output, inventory.Refresh(all, day), before)
	}
	ls.Flags().StringVar(&before, "contract-ends-before", "", "hardware refresh: list by rack the resources whose maintenance contract ends before this date (YYYY-MM-DD)")
}
