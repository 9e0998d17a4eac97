package diagram

import (
	"bufio"
	"fmt"
	"io"
	"strings"
)

// dotFill colours a node of the network drawing by tier, as the SVG does.
func dotFill(n NetNode) string {
	if n.Level < hostTier {
		return [...]string{"#f08a6c", "#f5a86c", "#f7c46c", "#e6d86c", "#c8e06c"}[n.Level]
	}
	switch n.Kind {
	case "server":
		return "#9ec5e8"
	case "switch":
		return "#a8d8a0"
	case "pdu":
		return "#d6d6d6"
	}
	return "#dcc8ec"
}

// dotQuote quotes s as a Graphviz ID.
func dotQuote(s string) string {
	s = strings.ReplaceAll(s, `\`, `\\`)
	s = strings.ReplaceAll(s, `"`, `\"`)
	s = strings.ReplaceAll(s, "\n", `\n`)
	return `"` + s + `"`
}

// NetworkDot writes the network drawing as a Graphviz graph: one rank per
// tier (rank=same), nodes in the layout's order, an edge per cable with
// its port names at both ends (upper end first, so that dot ranks top
// down), and each network the start carries as a note joined to its ports
// by dashed edges. Render it with `dot -Tsvg` or `dot -Tpng`.
func NetworkDot(w io.Writer, n *Network) error {
	b := bufio.NewWriter(w)
	fmt.Fprintf(b, "graph %s {\n", dotQuote("network of "+n.From))
	fmt.Fprintf(b, "  graph [rankdir=TB, ranksep=0.9, nodesep=0.35, label=%s, labelloc=t, fontname=\"Helvetica\"];\n", dotQuote("Network of "+n.From))
	b.WriteString("  node [shape=box, style=\"rounded,filled\", fontname=\"Helvetica\", fontsize=10];\n")
	b.WriteString("  edge [fontname=\"Helvetica\", fontsize=8];\n")
	for _, t := range n.Tiers {
		fmt.Fprintf(b, "  subgraph %s {\n    rank=same;\n", dotQuote("tier "+t.Name))
		for _, node := range t.Nodes {
			attrs := fmt.Sprintf("label=%s, fillcolor=%s", dotQuote(node.Name+"\n"+nodeSub(node)), dotQuote(dotFill(node)))
			if node.Start {
				attrs += ", penwidth=3"
			}
			fmt.Fprintf(b, "    %s [%s];\n", dotQuote(node.Name), attrs)
		}
		b.WriteString("  }\n")
	}
	for _, l := range n.Links {
		fmt.Fprintf(b, "  %s -- %s [taillabel=%s, headlabel=%s];\n", dotQuote(l.A), dotQuote(l.B), dotQuote(l.APort), dotQuote(l.BPort))
	}
	for _, g := range n.Networks {
		id := dotQuote("network " + g.Name)
		fmt.Fprintf(b, "  %s [shape=note, style=filled, fillcolor=\"#ffffff\", color=\"#33aa77\", label=%s];\n", id, dotQuote(g.Name+"\n"+netSub(g)))
		resources, ports := portsByResource(g)
		for i, r := range resources {
			fmt.Fprintf(b, "  %s -- %s [style=dashed, color=\"#33aa77\", taillabel=%s];\n", dotQuote(r), id, dotQuote(ports[i]))
		}
	}
	b.WriteString("}\n")
	return b.Flush()
}
