package main

import (
	"fmt"
	"strings"

	"connectrpc.com/connect"
	"github.com/spf13/cobra"

	"github.com/unyo-ops/unyo/core/api/unyov1"
	"github.com/unyo-ops/unyo/core/kinds/builtin"
	"github.com/unyo-ops/unyo/core/printer"
)

func newNodesCommand(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "nodes", Aliases: []string{"node"}, Short: "Nodes: the machines agents report from"}
	var clusterName, nodeSel string
	ls := &cobra.Command{
		Use: "ls", Aliases: []string{"list"}, Short: "List nodes of every cluster", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cl, ctx, cancel, err := g.connect(cmd)
			if err != nil {
				return err
			}
			defer cancel()
			resp, err := cl.Nodes.ListNodes(ctx, connect.NewRequest(&unyov1.ListNodesRequest{Cluster: clusterName}))
			if err != nil {
				return g.explain(err)
			}
			nodes, err := selectWhere(nodeSel, resp.Msg.GetNodes(), nodeLabels)
			if err != nil {
				return err
			}
			return printed(cmd, printer.Nodes(printer.Partial(cmd.OutOrStdout(), len(resp.Msg.GetClusterErrors()) > 0), g.output, nodes), resp.Msg.GetClusterErrors())
		},
	}
	addSelector(ls, &nodeSel)
	get := &cobra.Command{
		Use: "get NAME", Short: "Show one node", Args: cobra.ExactArgs(1), ValidArgsFunction: completeNamesOf(g, "Node"),
		RunE: func(cmd *cobra.Command, args []string) error {
			cl, ctx, cancel, err := g.connect(cmd)
			if err != nil {
				return err
			}
			defer cancel()
			resp, err := cl.Nodes.GetNode(ctx, connect.NewRequest(&unyov1.GetNodeRequest{Name: args[0], Cluster: clusterName}))
			if err != nil {
				return g.explain(err)
			}
			w := printer.Partial(cmd.OutOrStdout(), len(resp.Msg.GetClusterErrors()) > 0)
			if err := printer.Nodes(w, g.output, resp.Msg.GetNodes()); err != nil || (g.output != "" && g.output != printer.Table) {
				return printed(cmd, err, resp.Msg.GetClusterErrors())
			}
			return printed(cmd, printer.NodeOperations(w, resp.Msg.GetNodes()), resp.Msg.GetClusterErrors())
		},
	}
	del := &cobra.Command{
		Use: "delete NAME", Aliases: []string{"rm"}, Short: "Remove a node and revoke its credential (its agent must enrol again with a join token)", Args: cobra.ExactArgs(1),
		ValidArgsFunction: completeNamesOf(g, "Node"),
		RunE: func(cmd *cobra.Command, args []string) error {
			cl, ctx, cancel, err := g.connect(cmd)
			if err != nil {
				return err
			}
			defer cancel()
			resp, err := cl.Nodes.DeleteNode(ctx, connect.NewRequest(&unyov1.DeleteNodeRequest{Name: args[0], Cluster: clusterName}))
			if err != nil {
				return g.explain(err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "node %s deleted; its credential is revoked\n", args[0])
			return printed(cmd, nil, resp.Msg.GetClusterErrors())
		},
	}
	cordon := func(use, short string, cordoned bool) *cobra.Command {
		return &cobra.Command{
			Use: use + " NAME", Short: short, Args: cobra.ExactArgs(1),
			RunE: func(cmd *cobra.Command, args []string) error {
				cl, ctx, cancel, err := g.connect(cmd)
				if err != nil {
					return err
				}
				defer cancel()
				resp, err := cl.Nodes.CordonNode(ctx, connect.NewRequest(&unyov1.CordonNodeRequest{Name: args[0], Cluster: clusterName, Cordoned: cordoned}))
				if err != nil {
					return g.explain(err)
				}
				what := use + "ed"
				if resp.Msg.GetChanged() == 0 {
					what = "already " + what
				}
				fmt.Fprintf(cmd.OutOrStdout(), "node %s %s\n", args[0], what)
				return printed(cmd, nil, resp.Msg.GetClusterErrors())
			},
		}
	}
	cmd.PersistentFlags().StringVar(&clusterName, "cluster", "", "only this cluster")
	cmd.AddCommand(newNodesDrainCommand(g, &clusterName), newNodesSetCommand(g, &clusterName))
	cmd.AddCommand(ls, get, del,
		cordon("cordon", "Cordon a node: it keeps its computes but takes no new ones", true),
		cordon("uncordon", "Uncordon a node: it takes new computes again (Blocked ones are placed at once)", false))
	return cmd
}

// newKindCommands are `unyo NOUN ls|get` for every registered kind, with
// the commands some kinds add.
func newKindCommands(g *globals) []*cobra.Command {
	var cmds []*cobra.Command
	for _, k := range builtin.Kinds().Kinds() {
		if k.Name == "Cluster" {
			continue // `unyo clusters` (newClustersCommand) shows them with the registrations
		}
		cmd := newKindCommand(g, k)
		for _, ext := range kindExtensions() {
			if ext.kind == k.Name {
				ext.add(g, cmd)
			}
		}
		cmds = append(cmds, cmd)
	}
	return cmds
}

// kindExtension adds commands to a kind's generic `unyo NOUN`.
type kindExtension struct {
	kind string
	add  func(*globals, *cobra.Command)
}

// kindExtensions are the commands kinds add, one line each.
func kindExtensions() []kindExtension {
	return []kindExtension{
		{"Maintenance", addMaintenanceCommands},
		{"Rack", addRackDiagramCommand},
		{"Network", addNetworkDiagramCommand},
		{"PhysicalResource", addResourceCommands},
		{"Network", addNetworkCommands},
		{"RegionService", addServiceCommands},
		{"Compute", addComputeCommands},
		{"Loadbalancer", addLoadbalancerDetail},
		{"RegionService", addServiceLoadbalancer},
	}
}

// parseLevels turns "warning,critical" into levels.
func parseLevels(s string) ([]unyov1.Level, error) {
	if s == "" {
		return nil, nil
	}
	var out []unyov1.Level
	for _, w := range strings.Split(s, ",") {
		l, err := unyov1.ParseLevel(w)
		if err != nil {
			return nil, fmt.Errorf("--level: %w (comma-separated)", err)
		}
		out = append(out, l)
	}
	return out, nil
}

func newEventsCommand(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "events", Aliases: []string{"event"}, Short: "Events: check results as the clusters stored them"}
	var req unyov1.ListEventsRequest
	var levels, eventSel string
	var limit int
	ls := &cobra.Command{
		Use:   "ls",
		Short: "List the latest event per node and check (or the history)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			lv, err := parseLevels(levels)
			if err != nil {
				return err
			}
			req.Levels = lv
			req.Limit = int32(limit)
			cl, ctx, cancel, err := g.connect(cmd)
			if err != nil {
				return err
			}
			defer cancel()
			resp, err := cl.Events.ListEvents(ctx, connect.NewRequest(&req))
			if err != nil {
				return g.explain(err)
			}
			events, err := selectWhere(eventSel, resp.Msg.GetEvents(), (*unyov1.Event).GetLabels)
			if err != nil {
				return err
			}
			return printed(cmd, printer.Events(printer.Partial(cmd.OutOrStdout(), len(resp.Msg.GetClusterErrors()) > 0), g.output, events), resp.Msg.GetClusterErrors())
		},
	}
	addSelector(ls, &eventSel)
	f := ls.Flags()
	f.StringVar(&req.Cluster, "cluster", "", "only this cluster")
	f.StringVar(&req.Node, "node", "", "only this node")
	f.StringVar(&req.Check, "check", "", "only this check")
	f.StringVar(&levels, "level", "", "only these levels: success, warning, critical (comma-separated)")
	f.BoolVar(&req.History, "history", false, "every stored result, newest first, not just the latest per node/check")
	f.IntVar(&limit, "limit", 0, "at most this many events (default 1000)")
	var clusterName string
	get := &cobra.Command{
		Use: "get ID", Short: "Show one event (a unique prefix of its ID will do)", Args: cobra.ExactArgs(1),
		ValidArgsFunction: completeIDs(g, "event"),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := expandID(cmd, g, "event", args[0], clusterName)
			if err != nil {
				return err
			}
			args = []string{id}
			cl, ctx, cancel, err := g.connect(cmd)
			if err != nil {
				return err
			}
			defer cancel()
			resp, err := cl.Events.GetEvent(ctx, connect.NewRequest(&unyov1.GetEventRequest{Id: args[0], Cluster: clusterName}))
			if err != nil {
				return g.explain(err)
			}
			return printed(cmd, printer.EventDetails(printer.Partial(cmd.OutOrStdout(), len(resp.Msg.GetClusterErrors()) > 0), g.output, resp.Msg.GetEvents()), resp.Msg.GetClusterErrors())
		},
	}
	get.Flags().StringVar(&clusterName, "cluster", "", "only this cluster")
	cmd.AddCommand(ls, get, newEventsHistoryCommand(g))
	return cmd
}

func newClustersCommand(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "clusters", Aliases: []string{"cluster"},
		Short: "Clusters: their registration with root (add, delete) and their attributes (unyo apply -f of kind Cluster)"}
	var clusterSel string
	ls := &cobra.Command{
		Use: "ls", Aliases: []string{"list"}, Short: "List clusters, whether they answer, and their attributes", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cl, ctx, cancel, err := g.connect(cmd)
			if err != nil {
				return err
			}
			defer cancel()
			resp, err := cl.Cluster.ListClusters(ctx, connect.NewRequest(&unyov1.ListClustersRequest{}))
			if err != nil {
				return g.explain(err)
			}
			clusters, err := selectWhere(clusterSel, resp.Msg.GetClusters(), func(c *unyov1.ClusterInfo) map[string]string { return c.GetAttributes().GetLabels() })
			if err != nil {
				return err
			}
			return printer.Clusters(cmd.OutOrStdout(), g.output, clusters)
		},
	}
	addSelector(ls, &clusterSel)
	get := &cobra.Command{
		Use: "get NAME", Short: "Show a cluster's attributes (the Cluster object)", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cl, ctx, cancel, err := g.connect(cmd)
			if err != nil {
				return err
			}
			defer cancel()
			resp, err := cl.Objects.Get(ctx, connect.NewRequest(&unyov1.GetRequest{Ref: &unyov1.ObjectRef{Kind: "Cluster", Name: args[0]}}))
			if err != nil {
				return g.explain(err)
			}
			return printer.Objects(cmd.OutOrStdout(), g.output, resp.Msg.GetObjects())
		},
	}
	var url string
	add := &cobra.Command{
		Use:   "add NAME",
		Short: "Issue a cluster's credential: it is printed once; set it as the cluster's cluster.root_token",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cl, ctx, cancel, err := g.connect(cmd)
			if err != nil {
				return err
			}
			defer cancel()
			resp, err := cl.Cluster.AddCluster(ctx, connect.NewRequest(&unyov1.AddClusterRequest{Name: args[0], Url: url}))
			if err != nil {
				return g.explain(err)
			}
			fmt.Fprintln(cmd.OutOrStdout(), resp.Msg.GetToken())
			fmt.Fprintf(cmd.ErrOrStderr(), "the credential of cluster %s is shown only now: set it as that cluster's cluster.root_token (UNYO_CLUSTER_ROOT_TOKEN)\n", args[0])
			return nil
		},
	}
	add.Flags().StringVar(&url, "url", "", "where the cluster answers (it may also announce its URL itself when it registers)")
	del := &cobra.Command{
		Use: "delete NAME", Aliases: []string{"rm"}, Short: "Forget a cluster and revoke its credentials", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cl, ctx, cancel, err := g.connect(cmd)
			if err != nil {
				return err
			}
			defer cancel()
			if _, err := cl.Cluster.DeleteCluster(ctx, connect.NewRequest(&unyov1.DeleteClusterRequest{Name: args[0]})); err != nil {
				return g.explain(err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "cluster %s deleted; its credentials are revoked (its attributes stay: unyo delete cluster %s removes them)\n", args[0], args[0])
			return nil
		},
	}
	cmd.AddCommand(ls, get, add, del)
	return cmd
}

func newStatusCommand(g *globals) *cobra.Command {
	return &cobra.Command{
		Use: "status", Short: "Show which server answers and what it runs", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cl, ctx, cancel, err := g.connect(cmd)
			if err != nil {
				return err
			}
			defer cancel()
			resp, err := cl.Status.GetStatus(ctx, connect.NewRequest(&unyov1.GetStatusRequest{}))
			if err != nil {
				return g.explain(err)
			}
			return printer.Status(cmd.OutOrStdout(), g.output, resp.Msg)
		},
	}
}
