package main

import (
	"cmp"
	"slices"

	"connectrpc.com/connect"
	"github.com/spf13/cobra"

	"github.com/unyo-ops/unyo/core/api/unyov1"
	"github.com/unyo-ops/unyo/core/printer"
)

// newPluginLsCommand lists the plugins that run: the check plugins of every
// node's agent (as of its latest heartbeat) and the action plugins of the
// cluster servers. Through root, the clusters' plugins come with
// ListClusters; through a cluster, from the replica that answers.
func newPluginLsCommand(g *globals) *cobra.Command {
	var clusterName string
	cmd := &cobra.Command{
		Use: "ls", Aliases: []string{"list"}, Short: "List the plugins agents and cluster servers run, with their state",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cl, ctx, cancel, err := g.connect(cmd)
			if err != nil {
				return err
			}
			defer cancel()
			st, err := cl.Status.GetStatus(ctx, connect.NewRequest(&unyov1.GetStatusRequest{}))
			if err != nil {
				return g.explain(err)
			}
			var rows []printer.PluginRow
			if st.Msg.GetRole() == "root" {
				resp, err := cl.Cluster.ListClusters(ctx, connect.NewRequest(&unyov1.ListClustersRequest{}))
				if err != nil {
					return g.explain(err)
				}
				for _, c := range resp.Msg.GetClusters() {
					if clusterName != "" && c.GetName() != clusterName {
						continue
					}
					for _, p := range c.GetPlugins() {
						rows = append(rows, printer.PluginRow{Cluster: c.GetName(), Status: p})
					}
				}
			} else if clusterName == "" || clusterName == st.Msg.GetCluster() {
				for _, p := range st.Msg.GetPlugins() {
					rows = append(rows, printer.PluginRow{Cluster: st.Msg.GetCluster(), Status: p})
				}
			}
			nodes, err := cl.Nodes.ListNodes(ctx, connect.NewRequest(&unyov1.ListNodesRequest{Cluster: clusterName}))
			if err != nil {
				return g.explain(err)
			}
			for _, n := range nodes.Msg.GetNodes() {
				for _, p := range n.GetPlugins() {
					rows = append(rows, printer.PluginRow{Cluster: n.GetCluster(), Node: n.GetName(), Status: p})
				}
			}
			// Clusters' own plugins first, then nodes; by name within each.
			onNode := func(r printer.PluginRow) int {
				if r.Node != "" {
					return 1
				}
				return 0
			}
			slices.SortStableFunc(rows, func(a, b printer.PluginRow) int {
				return cmp.Or(
					cmp.Compare(onNode(a), onNode(b)),
					cmp.Compare(a.Cluster, b.Cluster),
					cmp.Compare(a.Node, b.Node),
					cmp.Compare(a.Status.GetKind(), b.Status.GetKind()),
					cmp.Compare(a.Status.GetName(), b.Status.GetName()),
				)
			})
			return printed(cmd, printer.Plugins(printer.Partial(cmd.OutOrStdout(), len(nodes.Msg.GetClusterErrors()) > 0), g.output, rows), nodes.Msg.GetClusterErrors())
		},
	}
	cmd.Flags().StringVar(&clusterName, "cluster", "", "only this cluster")
	return cmd
}
