package main

import (
	"fmt"
	"time"

	"connectrpc.com/connect"
	"github.com/spf13/cobra"

	"github.com/unyo-ops/unyo/core/api/unyov1"
)

// newNodesDrainCommand is `unyo nodes drain NAME...`: every node named is
// cordoned first, so that no replacement lands on a node about to be
// drained, then each drain starts (server-side; the command returns).
func newNodesDrainCommand(g *globals, clusterName *string) *cobra.Command {
	var (
		deadline      time.Duration
		force, cancel bool
	)
	cmd := &cobra.Command{
		Use:   "drain NAME...",
		Short: "Drain nodes: cordon them, open a maintenance, replace their computes elsewhere, then remove the originals",
		Long: `Drain nodes, server-side: each node is cordoned and a Maintenance naming the
drain silences its alerts; every compute on it gets a replacement on another
node first, and each original is removed only once its replacement is Active.
The drain ends (and its Maintenance with it) when the node is empty. At the
deadline, --force removes what is left without replacements; without it the
drain stops and says what is left (unyo nodes get). --cancel, or
unyo nodes uncordon, stops a drain; replacements not yet Active are removed.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cl, ctx, cancelCtx, err := g.connect(cmd)
			if err != nil {
				return err
			}
			defer cancelCtx()
			if !cancel && len(args) > 1 {
				for _, name := range args {
					if _, err := cl.Nodes.CordonNode(ctx, connect.NewRequest(&unyov1.CordonNodeRequest{Name: name, Cluster: *clusterName, Cordoned: true})); err != nil {
						return g.explain(err)
					}
				}
			}
			var errs []*unyov1.ClusterError
			for _, name := range args {
				resp, err := cl.Nodes.DrainNode(ctx, connect.NewRequest(&unyov1.DrainNodeRequest{
					Name: name, Cluster: *clusterName, Deadline: deadline.String(), Force: force, Cancel: cancel,
				}))
				if err != nil {
					return g.explain(err)
				}
				errs = append(errs, resp.Msg.GetClusterErrors()...)
				switch {
				case cancel && resp.Msg.GetChanged() == 0:
					fmt.Fprintf(cmd.OutOrStdout(), "node %s was not draining\n", name)
				case cancel:
					fmt.Fprintf(cmd.OutOrStdout(), "node %s: drain cancelled (the node stays cordoned)\n", name)
				default:
					fmt.Fprintf(cmd.OutOrStdout(), "node %s draining (deadline %s, force %v); follow it with: unyo nodes get %s\n", name, deadline, force, name)
				}
			}
			return printed(cmd, nil, errs)
		},
	}
	cmd.Flags().DurationVar(&deadline, "deadline", time.Hour, "how long the drain may take")
	cmd.Flags().BoolVar(&force, "force", false, "at the deadline, remove what is left without replacements")
	cmd.Flags().BoolVar(&cancel, "cancel", false, "stop a drain in progress (the node stays cordoned)")
	return cmd
}

// newNodesSetCommand is `unyo nodes set NAME --auto-cordon D --auto-drain D`.
func newNodesSetCommand(g *globals, clusterName *string) *cobra.Command {
	var cordon, drain string
	cmd := &cobra.Command{
		Use:   "set NAME",
		Short: "Set a node's automatic cordon and drain: a duration, off, or default (the cluster's)",
		Long: `Set a node's automatic cordon and drain. A node not Ready (Stale or Down) for
--auto-cordon is cordoned, and uncordoned once Ready again as long (only when
unyo cordoned it); not Ready for --auto-drain, it is drained. Each takes a
duration (5m, 1h), off, or default (the cluster's cluster.auto_cordon_after
and cluster.auto_drain_after).`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if cordon == "" && drain == "" {
				return fmt.Errorf("nothing to set: give --auto-cordon or --auto-drain")
			}
			cl, ctx, cancel, err := g.connect(cmd)
			if err != nil {
				return err
			}
			defer cancel()
			resp, err := cl.Nodes.SetNodeAuto(ctx, connect.NewRequest(&unyov1.SetNodeAutoRequest{Name: args[0], Cluster: *clusterName, CordonAfter: cordon, DrainAfter: drain}))
			if err != nil {
				return g.explain(err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "node %s: automatic cordon and drain set\n", args[0])
			return printed(cmd, nil, resp.Msg.GetClusterErrors())
		},
	}
	cmd.Flags().StringVar(&cordon, "auto-cordon", "", "cordon the node when not Ready this long: a duration, off, or default")
	cmd.Flags().StringVar(&drain, "auto-drain", "", "drain the node when not Ready this long: a duration, off, or default")
	return cmd
}
