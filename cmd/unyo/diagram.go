package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"

	"connectrpc.com/connect"
	"github.com/spf13/cobra"

	"github.com/unyo-ops/unyo/core/api/unyov1"
	"github.com/unyo-ops/unyo/core/client"
	"github.com/unyo-ops/unyo/provision/diagram"
)

// diagramFlags are the flags both diagram commands take.
type diagramFlags struct {
	format string
	width  int
}

// check refuses a format the drawing does not have, and -o, which is for
// lists: a diagram's format is --format.
func (d *diagramFlags) check(g *globals, what string, formats ...string) error {
	if g.output != "table" {
		return fmt.Errorf("-o %s: diagrams are not lists; use --format %s", g.output, strings.Join(formats, "|"))
	}
	if !slices.Contains(formats, d.format) {
		last := len(formats) - 1
		return fmt.Errorf("--format %q: %s are drawn as %s or %s", d.format, what, strings.Join(formats[:last], ", "), formats[last])
	}
	return nil
}

func (d *diagramFlags) bind(cmd *cobra.Command, formats string) {
	cmd.Flags().StringVar(&d.format, "format", "text", "drawing format: "+formats)
	// The shell exports COLUMNS only sometimes; 0 means 120.
	width, _ := strconv.Atoi(os.Getenv("COLUMNS"))
	cmd.Flags().IntVar(&d.width, "width", width, "terminal width for --format text, 80 to 200 columns (default $COLUMNS, else 120)")
}

// addRackDiagramCommand adds `unyo racks diagram`.
func addRackDiagramCommand(g *globals, cmd *cobra.Command) {
	var d diagramFlags
	var floor, clusterName string
	sub := &cobra.Command{
		Use:   "diagram --floor FLOOR | --cluster CLUSTER [--format text|svg]",
		Short: "Draw a floor's racks with each resource in its units, or the racks a cluster's nodes are in",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if (floor == "") == (clusterName == "") {
				return fmt.Errorf("give either --floor or --cluster")
			}
			if err := d.check(g, "racks", "text", "svg"); err != nil {
				return err
			}
			cl, ctx, cancel, err := g.connect(cmd)
			if err != nil {
				return err
			}
			defer cancel()
			objs, err := listObjects(ctx, cl, "Floor", "Rack", "PhysicalResource")
			if err != nil {
				return g.explain(err)
			}
			var nodes []*unyov1.Node
			if clusterName != "" {
				resp, err := cl.Nodes.ListNodes(ctx, connect.NewRequest(&unyov1.ListNodesRequest{Cluster: clusterName}))
				if err != nil {
					return g.explain(err)
				}
				if errs := resp.Msg.GetClusterErrors(); len(errs) > 0 {
					return fmt.Errorf("cluster %s did not list its nodes: %s", clusterName, errs[0].GetError())
				}
				nodes = resp.Msg.GetNodes()
			}
			return drawRacks(cmd.OutOrStdout(), diagram.FromObjects(objs), floor, clusterName, nodes, d)
		},
	}
	sub.Flags().StringVar(&floor, "floor", "", "draw this floor's racks")
	// It shadows the noun's --cluster ("only this cluster"): racks are
	// root's, and here the cluster is what is drawn.
	sub.Flags().StringVar(&clusterName, "cluster", "", "draw the racks this cluster's nodes are in (its virtual rack view)")
	d.bind(sub, "text or svg")
	cmd.AddCommand(sub)
}

// drawRacks lays out and renders a rack diagram from what root listed.
func drawRacks(w io.Writer, inv diagram.Inventory, floor, clusterName string, nodes []*unyov1.Node, d diagramFlags) error {
	var v *diagram.Racks
	if clusterName != "" {
		v = diagram.ClusterRacks(inv, clusterName, nodes, diagram.RackOptions{})
	} else {
		var err error
		if v, err = diagram.FloorRacks(inv, floor, diagram.RackOptions{}); err != nil {
			return err
		}
	}
	if d.format == "svg" {
		return diagram.RacksSVG(w, v)
	}
	return diagram.RacksText(w, v, diagram.TextOptions{Width: d.width})
}

// addNetworkDiagramCommand adds `unyo networks diagram`.
func addNetworkDiagramCommand(g *globals, cmd *cobra.Command) {
	var d diagramFlags
	var from string
	sub := &cobra.Command{
		Use:   "diagram --from RESOURCE [--format text|svg|dot]",
		Short: "Draw the network a resource belongs to, up through the router tiers, and the networks its ports carry",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if from == "" {
				return fmt.Errorf("--from RESOURCE is required")
			}
			if err := d.check(g, "networks", "text", "svg", "dot"); err != nil {
				return err
			}
			cl, ctx, cancel, err := g.connect(cmd)
			if err != nil {
				return err
			}
			defer cancel()
			objs, err := listObjects(ctx, cl, "PhysicalResource", "Network")
			if err != nil {
				return g.explain(err)
			}
			return drawNetwork(cmd.OutOrStdout(), diagram.FromObjects(objs), from, d)
		},
	}
	sub.Flags().StringVar(&from, "from", "", "the resource to start from (a server, or a router to see every network it holds)")
	d.bind(sub, "text, svg or dot")
	cmd.AddCommand(sub)
}

// drawNetwork lays out and renders a network diagram from what root listed.
func drawNetwork(w io.Writer, inv diagram.Inventory, from string, d diagramFlags) error {
	n, err := diagram.NetworkFrom(inv, from)
	if err != nil {
		return err
	}
	switch d.format {
	case "svg":
		return diagram.NetworkSVG(w, n)
	case "dot":
		return diagram.NetworkDot(w, n)
	}
	return diagram.NetworkText(w, n, diagram.TextOptions{Width: d.width})
}

// listObjects lists the objects of kinds from root, which owns them.
func listObjects(ctx context.Context, cl *client.Clients, kinds ...string) ([]*unyov1.Object, error) {
	var out []*unyov1.Object
	for _, k := range kinds {
		resp, err := cl.Objects.List(ctx, connect.NewRequest(&unyov1.ListRequest{Kind: k}))
		if err != nil {
			return nil, err
		}
		out = append(out, resp.Msg.GetObjects()...)
	}
	return out, nil
}
