package main

import (
	"errors"
	"fmt"
	"io"
	"text/tabwriter"

	"connectrpc.com/connect"
	"github.com/spf13/cobra"

	"github.com/unyo-ops/unyo/core/api/unyov1"
	"github.com/unyo-ops/unyo/core/kinds/builtin"
	"github.com/unyo-ops/unyo/core/printer"
	"github.com/unyo-ops/unyo/provision/service"
)

// addLoadbalancerDetail makes `unyo loadbalancers get NAME` print, below
// the load balancer's row, its backends with their health, reason and
// traffic.
func addLoadbalancerDetail(g *globals, cmd *cobra.Command) {
	afterGet(g, cmd, func(cmd *cobra.Command, name string) error {
		l, err := getLoadbalancer(g, cmd, name)
		if err != nil || l == nil {
			return err
		}
		return printLoadbalancerBackends(cmd.OutOrStdout(), l)
	})
}

// addServiceLoadbalancer makes `unyo services get NAME` print the
// service's load balancer, if it has one: its VIP, node and backends.
func addServiceLoadbalancer(g *globals, cmd *cobra.Command) {
	afterGet(g, cmd, func(cmd *cobra.Command, name string) error {
		l, err := getLoadbalancer(g, cmd, service.LoadbalancerName(name))
		if err != nil || l == nil {
			return err
		}
		w := cmd.OutOrStdout()
		fmt.Fprintf(w, "\nLoad balancer %s: VIP %s, ports %s, %s", l.GetName(), dash(l.GetVip()), builtin.LoadbalancerPorts(l.GetSpec()), dash(l.GetStatus().GetPhase()))
		if n := l.GetStatus().GetNode(); n != "" {
			fmt.Fprintf(w, " on node %s of cluster %s", n, l.GetCluster())
		}
		fmt.Fprintf(w, ", backends %s healthy\n", builtin.LoadbalancerBackends(l))
		return printLoadbalancerBackends(w, l)
	})
}

// afterGet runs more after a kind's `get NAME` printed its table.
func afterGet(g *globals, cmd *cobra.Command, more func(cmd *cobra.Command, name string) error) {
	for _, c := range cmd.Commands() {
		if c.Name() != "get" {
			continue
		}
		get := c.RunE
		c.RunE = func(cmd *cobra.Command, args []string) error {
			if err := get(cmd, args); err != nil {
				return err
			}
			if g.output != "" && g.output != printer.Table {
				return nil
			}
			return more(cmd, args[0])
		}
	}
}

// getLoadbalancer reads root's load balancer name; nil when there is none.
func getLoadbalancer(g *globals, cmd *cobra.Command, name string) (*unyov1.Loadbalancer, error) {
	cl, ctx, cancel, err := g.connect(cmd)
	if err != nil {
		return nil, err
	}
	defer cancel()
	resp, err := cl.Objects.Get(ctx, connect.NewRequest(&unyov1.GetRequest{Ref: &unyov1.ObjectRef{Kind: service.KindLoadbalancer, Name: name}}))
	var ce *connect.Error
	if errors.As(err, &ce) && ce.Code() == connect.CodeNotFound {
		return nil, nil
	}
	if err != nil {
		return nil, g.explain(err)
	}
	for _, o := range resp.Msg.GetObjects() {
		if l := o.GetLoadbalancer(); l != nil {
			return l, nil
		}
	}
	return nil, nil
}

// printLoadbalancerBackends prints root's backends of l with what its
// provider reports of each: health, reason and traffic.
func printLoadbalancerBackends(w io.Writer, l *unyov1.Loadbalancer) error {
	seen := map[string]*unyov1.LoadbalancerBackendStatus{}
	for _, b := range l.GetStatus().GetBackends() {
		seen[b.GetCompute()] = b
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "BACKEND\tADDRESS\tHEALTHY\tREASON\tPACKETS\tBYTES")
	for _, b := range l.GetBackends() {
		st := seen[b.GetCompute()]
		healthy := "unknown"
		switch {
		case st == nil:
		case st.GetHealthy():
			healthy = "yes"
		default:
			healthy = "no"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%d\n", b.GetCompute(), b.GetAddress(), healthy, st.GetReason(), st.GetPackets(), st.GetBytes())
	}
	if len(l.GetBackends()) == 0 {
		fmt.Fprintln(tw, "(none: no replica is Active)\t\t\t\t\t")
	}
	return tw.Flush()
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
