package main

import (
	"fmt"
	"slices"
	"strings"

	"connectrpc.com/connect"
	"github.com/spf13/cobra"

	"github.com/unyo-ops/unyo/core/api/unyov1"
	"github.com/unyo-ops/unyo/core/kinds"
	"github.com/unyo-ops/unyo/core/kinds/builtin"
)

// fullIDLength is a UUID's: event and alert IDs are UUIDs, and a shorter
// argument is taken as a prefix.
const fullIDLength = 36

// resolveID returns the one ID of ids that starts with prefix. A whole ID,
// or a prefix of none, is returned as it is, for the server to answer
// (not found); a prefix of several is an error naming a few.
func resolveID(what, prefix string, ids []string) (string, error) {
	if len(prefix) >= fullIDLength {
		return prefix, nil
	}
	var hits []string
	for _, id := range ids {
		if strings.HasPrefix(id, prefix) && !slices.Contains(hits, id) {
			hits = append(hits, id)
		}
	}
	switch len(hits) {
	case 0:
		return prefix, nil
	case 1:
		return hits[0], nil
	}
	shown := hits[:min(len(hits), 3)]
	return "", fmt.Errorf("%s ID prefix %q is ambiguous: %d %ss start with it (%s...); give more of the ID", what, prefix, len(hits), what, strings.Join(shown, ", "))
}

// alertIDs are the IDs of the alerts in every state.
func alertIDs(g *globals, cmd *cobra.Command, cluster string) ([]string, error) {
	cl, ctx, cancel, err := g.connect(cmd)
	if err != nil {
		return nil, err
	}
	defer cancel()
	states := []unyov1.AlertState{unyov1.AlertState_ALERT_STATE_OPEN, unyov1.AlertState_ALERT_STATE_ACKNOWLEDGED,
		unyov1.AlertState_ALERT_STATE_RESOLVED, unyov1.AlertState_ALERT_STATE_CLOSED}
	resp, err := cl.Alerts.ListAlerts(ctx, connect.NewRequest(&unyov1.ListAlertsRequest{Cluster: cluster, States: states}))
	if err != nil {
		return nil, g.explain(err)
	}
	var ids []string
	for _, a := range resp.Msg.GetAlerts() {
		ids = append(ids, a.GetId())
	}
	return ids, nil
}

// eventIDs are the IDs of the latest events and of the newest history.
func eventIDs(g *globals, cmd *cobra.Command, cluster string) ([]string, error) {
	cl, ctx, cancel, err := g.connect(cmd)
	if err != nil {
		return nil, err
	}
	defer cancel()
	var ids []string
	for _, history := range []bool{false, true} {
		resp, err := cl.Events.ListEvents(ctx, connect.NewRequest(&unyov1.ListEventsRequest{Cluster: cluster, History: history}))
		if err != nil {
			return nil, g.explain(err)
		}
		for _, e := range resp.Msg.GetEvents() {
			ids = append(ids, e.GetId())
		}
	}
	return ids, nil
}

// expandID resolves an ID argument that may be a unique prefix.
func expandID(cmd *cobra.Command, g *globals, what, arg, cluster string) (string, error) {
	if len(arg) >= fullIDLength {
		return arg, nil
	}
	list := alertIDs
	if what == "event" {
		list = eventIDs
	}
	ids, err := list(g, cmd, cluster)
	if err != nil {
		return "", err
	}
	return resolveID(what, arg, ids)
}

// completeIDs completes alert or event IDs from the server (shell
// completion).
func completeIDs(g *globals, what string) cobra.CompletionFunc {
	return func(cmd *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
		if len(args) > 0 {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		list := alertIDs
		if what == "event" {
			list = eventIDs
		}
		cluster, _ := cmd.Flags().GetString("cluster")
		ids, err := list(g, cmd, cluster)
		if err != nil {
			return nil, cobra.ShellCompDirectiveError
		}
		return prefixed(ids, toComplete), cobra.ShellCompDirectiveNoFileComp
	}
}

func prefixed(words []string, prefix string) []string {
	var out []string
	for _, w := range words {
		if strings.HasPrefix(w, prefix) && !slices.Contains(out, w) {
			out = append(out, w)
		}
	}
	return out
}

// objectNames lists the names of a kind's objects.
func objectNames(cmd *cobra.Command, g *globals, kind string) ([]string, error) {
	cl, ctx, cancel, err := g.connect(cmd)
	if err != nil {
		return nil, err
	}
	defer cancel()
	cluster, _ := cmd.Flags().GetString("cluster")
	if kind == "Node" {
		resp, err := cl.Nodes.ListNodes(ctx, connect.NewRequest(&unyov1.ListNodesRequest{Cluster: cluster}))
		if err != nil {
			return nil, err
		}
		var names []string
		for _, n := range resp.Msg.GetNodes() {
			names = append(names, n.GetName())
		}
		return names, nil
	}
	resp, err := cl.Objects.List(ctx, connect.NewRequest(&unyov1.ListRequest{Kind: kind, Cluster: cluster}))
	if err != nil {
		return nil, err
	}
	var names []string
	for _, o := range resp.Msg.GetObjects() {
		names = append(names, kinds.Name(o))
	}
	return names, nil
}

// completeKindNames completes `KIND NAME...` (get, delete): kinds first,
// then the names of that kind's objects.
func completeKindNames(g *globals) cobra.CompletionFunc {
	return func(cmd *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
		if len(args) == 0 {
			var ks []string
			for _, k := range builtin.Kinds().Kinds() {
				ks = append(ks, strings.ToLower(k.Name))
			}
			return prefixed(ks, toComplete), cobra.ShellCompDirectiveNoFileComp
		}
		k, err := builtin.Kinds().Parse(args[0])
		if err != nil {
			return nil, cobra.ShellCompDirectiveError
		}
		return completeNamesOf(g, k.Name)(cmd, nil, toComplete)
	}
}

// completeNamesOf completes the one NAME argument of a kind's commands.
func completeNamesOf(g *globals, kind string) cobra.CompletionFunc {
	return func(cmd *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
		if len(args) > 0 {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		names, err := objectNames(cmd, g, kind)
		if err != nil {
			return nil, cobra.ShellCompDirectiveError
		}
		return prefixed(names, toComplete), cobra.ShellCompDirectiveNoFileComp
	}
}
