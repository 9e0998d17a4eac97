package main

import (
	"fmt"
	"time"

	"connectrpc.com/connect"
	"github.com/spf13/cobra"

	"github.com/unyo-ops/unyo/core/api/unyov1"
	"github.com/unyo-ops/unyo/core/kinds"
	"github.com/unyo-ops/unyo/core/printer"
)

// newKindCommand is `unyo NOUN ls|get` for a registered object kind.
func newKindCommand(g *globals, k kinds.Kind) *cobra.Command {
	cmd := &cobra.Command{Use: k.Noun, Aliases: k.Aliases, Short: k.Help}
	kind := k.Name
	var clusterName, sel string
	ls := &cobra.Command{
		Use: "ls", Aliases: []string{"list"}, Short: "List them in every cluster", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cl, ctx, cancel, err := g.connect(cmd)
			if err != nil {
				return err
			}
			defer cancel()
			resp, err := cl.Objects.List(ctx, connect.NewRequest(&unyov1.ListRequest{Kind: kind, Cluster: clusterName}))
			if err != nil {
				return g.explain(err)
			}
			objs, err := selectWhere(sel, resp.Msg.GetObjects(), objectLabels)
			if err != nil {
				return err
			}
			return printed(cmd, printer.Objects(printer.Partial(cmd.OutOrStdout(), len(resp.Msg.GetClusterErrors()) > 0), g.output, objs), resp.Msg.GetClusterErrors())
		},
	}
	addSelector(ls, &sel)
	get := &cobra.Command{
		Use: "get NAME", Short: "Show one", Args: cobra.ExactArgs(1), ValidArgsFunction: completeNamesOf(g, kind),
		RunE: func(cmd *cobra.Command, args []string) error {
			cl, ctx, cancel, err := g.connect(cmd)
			if err != nil {
				return err
			}
			defer cancel()
			resp, err := cl.Objects.Get(ctx, connect.NewRequest(&unyov1.GetRequest{Ref: &unyov1.ObjectRef{Kind: kind, Name: args[0], Cluster: clusterName}}))
			if err != nil {
				return g.explain(err)
			}
			return printed(cmd, printer.Objects(printer.Partial(cmd.OutOrStdout(), len(resp.Msg.GetClusterErrors()) > 0), g.output, resp.Msg.GetObjects()), resp.Msg.GetClusterErrors())
		},
	}
	cmd.PersistentFlags().StringVar(&clusterName, "cluster", "", "only this cluster")
	cmd.AddCommand(ls, get)
	return cmd
}

// addMaintenanceCommands adds `start` and `end` to `unyo maintenance`.
func addMaintenanceCommands(g *globals, cmd *cobra.Command) {
	var spec unyov1.MaintenanceSpec
	var name, clusterName, start, forDur string
	startCmd := &cobra.Command{
		Use:   "start --reason TEXT [--nodes N,..] [--checks C,..] [--for DURATION | --end TIME]",
		Short: "Start a maintenance now (or at --start); events it covers are silenced",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			spec.Owner = operator(spec.Owner)
			if spec.Start == "" && start != "" {
				spec.Start = start
			}
			if forDur != "" {
				d, err := time.ParseDuration(forDur)
				if err != nil {
					return fmt.Errorf("--for %q: %w", forDur, err)
				}
				from := time.Now()
				if spec.Start != "" {
					if from, err = time.Parse(time.RFC3339, spec.Start); err != nil {
						return fmt.Errorf("--start %q: %w (expected RFC 3339, such as 2026-11-21T14:00:00Z)", spec.Start, err)
					}
				}
				spec.End = from.Add(d).UTC().Format(time.RFC3339)
			}
			if name == "" {
				name = "m-" + time.Now().UTC().Format("20060102-150405")
			}
			m := &unyov1.Maintenance{Name: name, Cluster: clusterName, Spec: &spec}
			cl, ctx, cancel, err := g.connect(cmd)
			if err != nil {
				return err
			}
			defer cancel()
			resp, err := cl.Objects.Apply(ctx, connect.NewRequest(&unyov1.ApplyRequest{Objects: []*unyov1.Object{{Kind: &unyov1.Object_Maintenance{Maintenance: m}}}}))
			if err != nil {
				return g.explain(err)
			}
			printer.ApplyResults(cmd.OutOrStdout(), resp.Msg.GetResults())
			return printed(cmd, nil, resp.Msg.GetClusterErrors())
		},
	}
	f := startCmd.Flags()
	f.StringVar(&name, "name", "", "name (default m-<time>)")
	f.StringVar(&clusterName, "cluster", "", "only this cluster (default: every cluster)")
	f.StringSliceVar(&spec.Nodes, "nodes", nil, "node names or regular expressions (default: every node)")
	f.StringSliceVar(&spec.Checks, "checks", nil, "check names or regular expressions (default: every check)")
	f.StringVar(&spec.Reason, "reason", "", "what is being done (required)")
	f.StringVar(&spec.Owner, "owner", "", "who does it (default: UNYO_USER or your login name)")
	f.StringVar(&start, "start", "", "RFC 3339 start time (default now)")
	f.StringVar(&spec.End, "end", "", "RFC 3339 end time (default: open-ended, until `unyo maintenance end`)")
	f.StringVar(&forDur, "for", "", "duration instead of --end, e.g. 2h")

	var by string
	endCmd := &cobra.Command{
		Use: "end NAME", Short: "End a maintenance now", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cl, ctx, cancel, err := g.connect(cmd)
			if err != nil {
				return err
			}
			defer cancel()
			resp, err := cl.Maintenance.EndMaintenance(ctx, connect.NewRequest(&unyov1.EndMaintenanceRequest{Name: args[0], Cluster: clusterName, By: operator(by)}))
			if err != nil {
				return g.explain(err)
			}
			for _, m := range resp.Msg.GetMaintenances() {
				fmt.Fprintf(cmd.OutOrStdout(), "Maintenance/%s (%s) ended\n", m.GetName(), m.GetCluster())
			}
			return printed(cmd, nil, resp.Msg.GetClusterErrors())
		},
	}
	endCmd.Flags().StringVar(&by, "by", "", "who ends it, on a server without authentication (default: UNYO_USER or your login name); with a token the server records the token's name")
	endCmd.Flags().StringVar(&clusterName, "cluster", "", "only this cluster")
	cmd.AddCommand(startCmd, endCmd)
}
