package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"text/tabwriter"

	"connectrpc.com/connect"
	"github.com/spf13/cobra"

	"github.com/unyo-ops/unyo/core/api/unyov1"
	"github.com/unyo-ops/unyo/core/api/unyov1/unyov1connect"
	"github.com/unyo-ops/unyo/core/kinds"
	"github.com/unyo-ops/unyo/core/manifest"
	"github.com/unyo-ops/unyo/core/printer"
	"github.com/unyo-ops/unyo/provision/schedule"
	"github.com/unyo-ops/unyo/provision/service"
)

// addServiceCommands adds `scale`, `delete`, `plan` and `rollout` to `unyo services`.
func addServiceCommands(g *globals, cmd *cobra.Command) {
	scale := &cobra.Command{
		Use: "scale NAME N", Short: "Set a service's replicas (scale-down removes the highest indexes; 0 deletes the service)", Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			n, err := strconv.Atoi(args[1])
			if err != nil || n < 0 {
				return fmt.Errorf("N: %q is not a replica count (a whole number, 0 or more)", args[1])
			}
			cl, ctx, cancel, err := g.connect(cmd)
			if err != nil {
				return err
			}
			defer cancel()
			resp, err := cl.Objects.Get(ctx, connect.NewRequest(&unyov1.GetRequest{Ref: &unyov1.ObjectRef{Kind: service.KindService, Name: args[0]}}))
			if err != nil {
				return g.explain(err)
			}
			s := resp.Msg.GetObjects()[0].GetRegionService()
			if s.GetSpec().GetCompute() == nil {
				return fmt.Errorf("service %s has no compute spec to scale", args[0])
			}
			if a := s.GetSpec().GetCompute().GetAutoscale(); a != nil {
				// Root would keep the autoscaler's count anyway (it owns the replicas).
				return fmt.Errorf("service %s is autoscaled (min %d, max %d): its autoscaler owns the replicas; change spec.compute.autoscale (min, max) or remove it to set them, or `unyo services delete %s`", args[0], a.GetMin(), a.GetMax(), args[0])
			}
			s.Spec.Compute.Replicas = int32(n)
			s.Status = nil
			out, err := cl.Objects.Apply(ctx, connect.NewRequest(&unyov1.ApplyRequest{Objects: []*unyov1.Object{kinds.Wrap(s)}}))
			if err != nil {
				return g.explain(err)
			}
			return printer.ApplyResults(cmd.OutOrStdout(), out.Msg.GetResults())
		},
	}
	var file string
	plan := &cobra.Command{
		Use: "plan -f FILE", Short: "Show where a file's services' replicas would go, and why not, without reserving anything", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if file == "" {
				return errors.New("name the file with the RegionService: -f FILE")
			}
			objs, err := manifest.DecodeFile(file)
			if err != nil {
				return err
			}
			cl, ctx, cancel, err := g.connect(cmd)
			if err != nil {
				return err
			}
			defer cancel()
			clusters, err := cl.Cluster.ListClusters(ctx, connect.NewRequest(&unyov1.ListClustersRequest{}))
			if err != nil {
				return g.explain(err)
			}
			nodes, err := cl.Nodes.ListNodes(ctx, connect.NewRequest(&unyov1.ListNodesRequest{}))
			if err != nil {
				return g.explain(err)
			}
			cs := service.ClustersOf(clusters.Msg.GetClusters(), nodes.Msg.GetNodes())
			plans := map[string][]service.PlanLine{}
			var order []string
			for _, o := range objs {
				s := o.GetRegionService()
				if s == nil {
					continue
				}
				shape, err := flavorShape(ctx, cl.Objects, objs, s.GetSpec().GetCompute().GetFlavor())
				if err != nil {
					return fmt.Errorf("service %s: %w", s.GetName(), err)
				}
				plans[s.GetName()] = service.Plan(s, shape, cs)
				order = append(order, s.GetName())
			}
			if len(order) == 0 {
				return fmt.Errorf("%s holds no RegionService", file)
			}
			if g.output != "table" {
				b, err := json.MarshalIndent(plans, "", "  ")
				if err != nil {
					return err
				}
				_, err = fmt.Fprintln(cmd.OutOrStdout(), string(b))
				return err
			}
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			for _, name := range order {
				fmt.Fprint(tw, service.PlanText(plans[name]))
			}
			return tw.Flush()
		},
	}
	plan.Flags().StringVarP(&file, "file", "f", "", "the file with the RegionService (and, optionally, its flavor)")
	cmd.AddCommand(scale, plan, rolloutCommand(g), deleteCommand(g, service.KindService, "Delete a service: its computes are deleted from their clusters, then the service"))
}

// addComputeCommands adds `delete` to `unyo computes`.
func addComputeCommands(g *globals, cmd *cobra.Command) {
	cmd.AddCommand(deleteCommand(g, service.KindCompute, "Delete one replica: its service keeps one fewer, the others keep their names"))
}

// deleteCommand is `unyo NOUN delete NAME` for a root kind.
func deleteCommand(g *globals, kind, short string) *cobra.Command {
	return &cobra.Command{
		Use: "delete NAME", Aliases: []string{"rm"}, Short: short, Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cl, ctx, cancel, err := g.connect(cmd)
			if err != nil {
				return err
			}
			defer cancel()
			resp, err := cl.Objects.Delete(ctx, connect.NewRequest(&unyov1.DeleteRequest{Refs: []*unyov1.ObjectRef{{Kind: kind, Name: args[0]}}}))
			if err != nil {
				return g.explain(err)
			}
			return printed(cmd, printer.ApplyResults(cmd.OutOrStdout(), resp.Msg.GetResults()), resp.Msg.GetClusterErrors())
		},
	}
}

// flavorShape is a flavor's shape, from the file when it holds the flavor,
// else from root.
func flavorShape(ctx context.Context, objects unyov1connect.ObjectServiceClient, objs []*unyov1.Object, name string) (schedule.Resources, error) {
	for _, o := range objs {
		if f := o.GetFlavor(); f != nil && f.GetName() == name {
			return service.Shape(f)
		}
	}
	resp, err := objects.Get(ctx, connect.NewRequest(&unyov1.GetRequest{Ref: &unyov1.ObjectRef{Kind: "Flavor", Name: name}}))
	if err != nil {
		return schedule.Resources{}, fmt.Errorf("flavor %q: %w", name, err)
	}
	return service.Shape(resp.Msg.GetObjects()[0].GetFlavor())
}
