package diagram

import (
	"bufio"
	"cmp"
	"encoding/xml"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
)

// Rack elevation geometry, in pixels.
const (
	svgMargin     = 20
	svgTitleH     = 36
	svgUnitH      = 18
	svgRackW      = 250 // inside the frame
	svgRuler      = 26
	svgRackGap    = 30
	svgRackHead   = 34 // name and place above the frame
	svgRowLabelH  = 26
	svgRowGap     = 26
	svgRacksLine  = 10 // racks side by side before a row wraps
	svgCharW      = 6.0
	svgLineH      = 16
	svgNodeH      = 38
	svgTierGap    = 110
	svgTierLabelW = 150
	svgNodeGap    = 28
)

// svgStyle is shared by both drawings: the colours say what a resource is.
const svgStyle = `<style>
text{font-family:"DejaVu Sans Mono",Menlo,Consolas,monospace;font-size:10px;fill:#222}
.title{font-size:15px;font-weight:bold}
.label{font-size:12px;font-weight:bold;fill:#444}
.small{font-size:9px;fill:#666}
.ruler{font-size:9px;fill:#999;text-anchor:end}
.frame{fill:none;stroke:#333;stroke-width:2}
.empty{fill:#fafafa;stroke:#e4e4e4}
.foreign{fill:url(#hatch);stroke:#ccc}
.item{stroke:#555;stroke-width:1}
.start{stroke:#000;stroke-width:3}
.server{fill:#9ec5e8}
.switch{fill:#a8d8a0}
.router{fill:#f5b880}
.pdu{fill:#d6d6d6}
.other{fill:#dcc8ec}
.tier0{fill:#f08a6c}.tier1{fill:#f5a86c}.tier2{fill:#f7c46c}.tier3{fill:#e6d86c}.tier4{fill:#c8e06c}
.net{fill:#fff;stroke:#3a7;stroke-width:1.5;stroke-dasharray:5 3}
.link{stroke:#555;stroke-width:1.2;fill:none}
.netlink{stroke:#3a7;stroke-width:1;stroke-dasharray:4 3;fill:none}
.port{font-size:9px;fill:#333;paint-order:stroke;stroke:#fff;stroke-width:3px}
.mid{text-anchor:middle}
</style>
<defs><pattern id="hatch" width="6" height="6" patternUnits="userSpaceOnUse" patternTransform="rotate(45)"><rect width="6" height="6" fill="#f0f0f0"/><line x1="0" y1="0" x2="0" y2="6" stroke="#c8c8c8" stroke-width="2"/></pattern></defs>
`

// svgOpen starts a drawing of width by height pixels on white, with the
// shared style and a title; the caller closes the svg element and flushes.
func svgOpen(w io.Writer, width, height int, title string) *bufio.Writer {
	b := bufio.NewWriter(w)
	fmt.Fprintf(b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d">`+"\n", width, height, width, height)
	b.WriteString(svgStyle)
	fmt.Fprintf(b, `<rect width="%d" height="%d" fill="#fff"/>`+"\n", width, height)
	fmt.Fprintf(b, `<text class="title" x="%d" y="%d">%s</text>`+"\n", svgMargin, svgMargin+16, esc(title))
	return b
}

// kindClass is the CSS class colouring a resource of kind.
func kindClass(kind string) string {
	switch kind {
	case "server", "switch", "router", "pdu":
		return kind
	}
	return "other"
}

// esc escapes text for XML content and attribute values.
func esc(s string) string {
	var b strings.Builder
	_ = xml.EscapeText(&b, []byte(s))
	return b.String()
}

// chars is how many characters of the drawings' font fit in px.
func chars(px float64) int { return int(px / svgCharW) }

// ellipsis cuts s to n characters, its middle replaced by an ellipsis.
func ellipsis(s string, n int) string {
	if runes(s) <= n || n < 3 {
		return s
	}
	return strings.Replace(fit(s, n), "~", "…", 1)
}

// RacksSVG draws a rack elevation like NetBox's: each rack a frame of
// units numbered on the left, each resource a box coloured by kind with
// its name, empty units pale, units held outside the view hatched; rows
// of racks one under another; what could not be drawn listed below.
func RacksSVG(w io.Writer, v *Racks) error {
	type placed struct {
		r    Rack
		x, y int // top left of the frame
	}
	var racks []placed
	type label struct {
		x, y  int
		class string
		text  string
	}
	var labels []label
	rackStep := svgRuler + svgRackW + svgRackGap
	y := svgMargin + svgTitleH
	width := 2*svgMargin + rackStep
	for _, row := range v.Rows {
		for i := 0; i < len(row.Racks); i += svgRacksLine {
			band := row.Racks[i:min(i+svgRacksLine, len(row.Racks))]
			labels = append(labels, label{svgMargin, y + 16, "label", row.Label})
			y += svgRowLabelH
			top := 0
			for _, r := range band {
				top = max(top, r.Units)
			}
			for j, r := range band {
				x := svgMargin + svgRuler + j*rackStep
				racks = append(racks, placed{r, x, y + svgRackHead + (top-r.Units)*svgUnitH})
			}
			width = max(width, 2*svgMargin+len(band)*rackStep-svgRackGap)
			y += svgRackHead + top*svgUnitH + svgRowGap
		}
	}
	var lines []string
	if len(v.Apart) > 0 {
		lines = append(lines, "Not drawn:")
		for _, a := range v.Apart {
			lines = append(lines, fmt.Sprintf("  %s (%s): %s", a.Item.Name, orDash(a.Item.Kind), a.Reason))
		}
	}
	if len(v.Notes) > 0 {
		lines = append(lines, "Notes:")
		for _, n := range v.Notes {
			lines = append(lines, "  "+n)
		}
	}
	for _, l := range lines {
		width = max(width, 2*svgMargin+int(float64(runes(l))*svgCharW))
	}
	height := y + len(lines)*svgLineH + svgMargin

	b := svgOpen(w, width, height, "Racks of "+v.Title)
	for _, l := range labels {
		fmt.Fprintf(b, `<text class="%s" x="%d" y="%d">%s</text>`+"\n", l.class, l.x, l.y, esc(l.text))
	}
	for _, p := range racks {
		svgRack(b, p.r, p.x, p.y)
	}
	for i, l := range lines {
		fmt.Fprintf(b, `<text x="%d" y="%d" xml:space="preserve">%s</text>`+"\n", svgMargin, y+i*svgLineH+12, esc(l))
	}
	b.WriteString("</svg>\n")
	return b.Flush()
}

// svgRack draws one rack whose frame's top left is at x, y.
func svgRack(b *bufio.Writer, r Rack, x, y int) {
	fmt.Fprintf(b, `<g id="rack-%s">`+"\n", esc(r.Name))
	fmt.Fprintf(b, `<text class="label" x="%d" y="%d">%s</text>`+"\n", x, y-svgRackHead+14, esc(ellipsis(r.Name, chars(svgRackW))))
	fmt.Fprintf(b, `<text class="small" x="%d" y="%d">%s</text>`+"\n", x, y-svgRackHead+28, esc(ellipsis(rackPlace(r), chars(svgRackW*1.4))))
	for u := r.Units; u >= 1; u-- {
		fmt.Fprintf(b, `<text class="ruler" x="%d" y="%d">%d</text>`+"\n", x-5, y+(r.Units-u)*svgUnitH+13, u)
	}
	for _, s := range r.Slots {
		sy := y + (r.Units-s.Top)*svgUnitH
		h := (s.Top - s.Bottom + 1) * svgUnitH
		switch {
		case s.Foreign:
			fmt.Fprintf(b, `<rect class="foreign" x="%d" y="%d" width="%d" height="%d"><title>%s: not in this view</title></rect>`+"\n", x, sy, svgRackW, h, unitsWord(s.Bottom, s.Top))
		case s.Item == nil:
			fmt.Fprintf(b, `<rect class="empty" x="%d" y="%d" width="%d" height="%d"><title>unit %d: empty</title></rect>`+"\n", x, sy, svgRackW, h, s.Top)
		default:
			svgItem(b, *s.Item, x, sy, h, r.Name, r.Floor)
		}
	}
	fmt.Fprintf(b, `<rect class="frame" x="%d" y="%d" width="%d" height="%d"/>`+"\n", x, y, svgRackW, r.Units*svgUnitH)
	b.WriteString("</g>\n")
}

func unitsWord(bottom, top int) string {
	if bottom == top {
		return fmt.Sprintf("unit %d", bottom)
	}
	return "units " + unitSpan(bottom, top)
}

// svgItem draws a resource's box: its name, then (given room) its kind and
// model, then what runs on it.
func svgItem(b *bufio.Writer, it Item, x, y, h int, prefixes ...string) {
	tip := fmt.Sprintf("%s\nkind: %s", it.Name, orDash(it.Kind))
	if it.Role != "" {
		tip += "\nrole: " + it.Role
	}
	if it.Model != "" {
		tip += "\nmodel: " + it.Model
	}
	tip += fmt.Sprintf("\nunits: %s", unitSpan(it.Unit, it.Unit+it.Height-1))
	for i, c := range it.Children {
		if i == 0 {
			tip += "\non it:"
		}
		tip += fmt.Sprintf("\n  %s (%s)", c.Name, orDash(c.Kind))
	}
	boxClass := kindClass(it.Kind)
	if it.State != "" {
		boxClass += " state-" + it.State
		tip += "\nstate: " + it.State
	}
	if it.Href != "" {
		fmt.Fprintf(b, `<a href="%s">`, esc(it.Href))
	}
	fmt.Fprintf(b, `<g><title>%s</title>`, esc(tip))
	fmt.Fprintf(b, `<rect class="item %s" x="%d" y="%d" width="%d" height="%d" rx="2"/>`, boxClass, x+1, y+1, svgRackW-2, h-2)
	n := chars(svgRackW - 12)
	detail := orDash(it.Kind)
	if it.Model != "" {
		detail += " " + it.Model
	}
	suffix, more := itemMore(detail, it.Children, h/svgUnitH)
	name := func(n int) string { return strings.ReplaceAll(shorten(it.Name, n, prefixes...), "~", "…") }
	lines := []string{name(n)}
	if suffix != "" {
		lines[0] = name(n-runes(suffix)-1) + " " + suffix
	}
	for _, l := range more {
		lines = append(lines, ellipsis(l, n))
	}
	for i, l := range lines {
		class := ""
		if i > 0 {
			class = ` class="small"`
		}
		fmt.Fprintf(b, `<text%s x="%d" y="%d">%s</text>`, class, x+6, y+i*svgUnitH+13, esc(l))
	}
	b.WriteString("</g>")
	if it.Href != "" {
		b.WriteString("</a>")
	}
	b.WriteString("\n")
}

// netBox is a node's box in the network drawing.
type netBox struct {
	x, y, w int
}

func (n netBox) cx() int { return n.x + n.w/2 }

// NetworkSVG draws the network layered by tier, gateway routers on top:
// one row of boxes per tier (in the layout's order), a line per cable
// labelled with its port names at both ends, and below the tiers the
// networks the start carries, joined by dashed lines to the ports that
// carry them.
func NetworkSVG(w io.Writer, n *Network) error {
	boxes := map[string]netBox{}
	nodeW := func(name, sub string) int {
		return max(110, int(float64(max(runes(name), runes(sub)))*svgCharW)+20)
	}
	type row struct {
		label string
		names []string
		subs  []string
		width int
	}
	var rows []row
	for _, t := range n.Tiers {
		r := row{label: t.Name}
		for _, node := range t.Nodes {
			sub := nodeSub(node)
			r.names = append(r.names, node.Name)
			r.subs = append(r.subs, sub)
			r.width += nodeW(node.Name, sub) + svgNodeGap
		}
		rows = append(rows, r)
	}
	if len(n.Networks) > 0 {
		r := row{label: "networks"}
		for _, g := range n.Networks {
			sub := netSub(g)
			r.names = append(r.names, "net:"+g.Name)
			r.subs = append(r.subs, sub)
			r.width += nodeW(g.Name, sub) + svgNodeGap
		}
		rows = append(rows, r)
	}
	widest := 0
	for _, r := range rows {
		widest = max(widest, r.width)
	}
	width := 2*svgMargin + svgTierLabelW + widest
	top := svgMargin + svgTitleH + 10
	for i, r := range rows {
		x := svgMargin + svgTierLabelW + (widest-r.width)/2
		for j, name := range r.names {
			label := strings.TrimPrefix(name, "net:")
			bw := nodeW(label, r.subs[j])
			boxes[name] = netBox{x: x, y: top + i*svgTierGap, w: bw}
			x += bw + svgNodeGap
		}
	}
	height := top + max(0, len(rows)-1)*svgTierGap + svgNodeH + svgMargin
	var notes []string
	if len(n.Notes) > 0 {
		notes = append([]string{"Notes:"}, n.Notes...)
		for _, l := range notes {
			width = max(width, 2*svgMargin+int(float64(runes(l)+2)*svgCharW))
		}
		height += len(notes) * svgLineH
	}

	b := svgOpen(w, width, height, "Network of "+n.From)
	for i, r := range rows {
		fmt.Fprintf(b, `<text class="label" x="%d" y="%d">%s</text>`+"\n", svgMargin, top+i*svgTierGap+svgNodeH/2+4, esc(r.label))
	}
	// Lines first, so that boxes cover their ends.
	var edges []svgEdge
	for _, l := range n.Links {
		a, c := boxes[l.A], boxes[l.B]
		if a.y == c.y {
			// Peers in one tier: an arc above the row.
			left, right := a, c
			lp, rp := l.APort, l.BPort
			if c.x < a.x {
				left, right, lp, rp = c, a, l.BPort, l.APort
			}
			x1, x2, y0 := left.cx(), right.cx(), a.y
			fmt.Fprintf(b, `<path class="link" d="M%d %d Q%d %d %d %d"/>`+"\n", x1, y0, (x1+x2)/2, y0-40, x2, y0)
			svgPort(b, x1+12, y0-10, lp)
			svgPort(b, x2-12, y0-10, rp)
			continue
		}
		edges = append(edges, svgEdge{up: l.A, down: l.B, upPort: l.APort, downPort: l.BPort, class: "link"})
	}
	for _, g := range n.Networks {
		resources, ports := portsByResource(g)
		for i, r := range resources {
			if _, ok := boxes[r]; ok {
				edges = append(edges, svgEdge{up: r, down: "net:" + g.Name, upPort: ports[i], class: "netlink"})
			}
		}
	}
	attachEdges(edges, boxes)
	for _, e := range edges {
		fmt.Fprintf(b, `<line class="%s" x1="%d" y1="%d" x2="%d" y2="%d"/>`+"\n", e.class, e.x1, e.y1, e.x2, e.y2)
		svgPortLabel(b, e, e.upPort, true)
		svgPortLabel(b, e, e.downPort, false)
	}
	for _, t := range n.Tiers {
		for _, node := range t.Nodes {
			bx := boxes[node.Name]
			class := fmt.Sprintf("item tier%d", node.Level)
			if node.Level == hostTier {
				class = "item " + kindClass(node.Kind)
			}
			if node.Start {
				class += " start"
			}
			if node.State != "" {
				class += " state-" + node.State
			}
			if node.Href != "" {
				fmt.Fprintf(b, `<a href="%s">`, esc(node.Href))
			}
			fmt.Fprintf(b, `<g><title>%s</title><rect class="%s" x="%d" y="%d" width="%d" height="%d" rx="4"/>`, esc(node.Name), class, bx.x, bx.y, bx.w, svgNodeH)
			fmt.Fprintf(b, `<text class="mid" x="%d" y="%d">%s</text><text class="small mid" x="%d" y="%d">%s</text></g>`,
				bx.cx(), bx.y+16, esc(node.Name), bx.cx(), bx.y+30, esc(nodeSub(node)))
			if node.Href != "" {
				b.WriteString("</a>")
			}
			b.WriteString("\n")
		}
	}
	for _, g := range n.Networks {
		bx := boxes["net:"+g.Name]
		fmt.Fprintf(b, `<g><title>%s</title><rect class="net" x="%d" y="%d" width="%d" height="%d" rx="10"/>`, esc("network "+g.Name), bx.x, bx.y, bx.w, svgNodeH)
		fmt.Fprintf(b, `<text class="mid" x="%d" y="%d">%s</text><text class="small mid" x="%d" y="%d">%s</text></g>`+"\n",
			bx.cx(), bx.y+16, esc(g.Name), bx.cx(), bx.y+30, esc(netSub(g)))
	}
	for i, l := range notes {
		fmt.Fprintf(b, `<text x="%d" y="%d" xml:space="preserve">%s</text>`+"\n", svgMargin, height-svgMargin-(len(notes)-i-1)*svgLineH, esc(l))
	}
	b.WriteString("</svg>\n")
	return b.Flush()
}

// svgEdge is a line between two tiers, its ends attached to the boxes'
// bottom (up) and top (down) edges.
type svgEdge struct {
	up, down         string
	upPort, downPort string
	class            string
	x1, y1, x2, y2   int
}

// attachEdges spreads the lines leaving each box's bottom (and reaching
// each box's top) along its width, in the order of their other ends, so
// that they do not cross at the box and their port labels stay apart.
func attachEdges(edges []svgEdge, boxes map[string]netBox) {
	bottom := map[string][]int{}
	top := map[string][]int{}
	for i, e := range edges {
		bottom[e.up] = append(bottom[e.up], i)
		top[e.down] = append(top[e.down], i)
	}
	spread := func(ends map[string][]int, other func(e svgEdge) string, set func(e *svgEdge, x int)) {
		for name, idx := range ends {
			bx := boxes[name]
			slices.SortStableFunc(idx, func(i, j int) int {
				return cmp.Or(cmp.Compare(boxes[other(edges[i])].cx(), boxes[other(edges[j])].cx()), cmp.Compare(i, j))
			})
			for k, i := range idx {
				set(&edges[i], bx.x+bx.w*(k+1)/(len(idx)+1))
			}
		}
	}
	spread(bottom, func(e svgEdge) string { return e.down }, func(e *svgEdge, x int) { e.x1, e.y1 = x, boxes[e.up].y+svgNodeH })
	spread(top, func(e svgEdge) string { return e.up }, func(e *svgEdge, x int) { e.x2, e.y2 = x, boxes[e.down].y })
}

// svgPortLabel writes a port's name on a line, near the end it belongs to.
func svgPortLabel(b *bufio.Writer, e svgEdge, port string, upper bool) {
	if upper {
		// A network's dashed line is labelled further down than a cable,
		// clear of the cables' labels at the same box.
		d := 18.0
		if e.class == "netlink" {
			d = 40
		}
		x, y := along(e.x1, e.y1, e.x2, e.y2, d)
		svgPort(b, x, y+4, port)
		return
	}
	x, y := along(e.x2, e.y2, e.x1, e.y1, 18)
	svgPort(b, x, y+4, port)
}

// along is the point d pixels from (x1, y1) towards (x2, y2).
func along(x1, y1, x2, y2 int, d float64) (int, int) {
	dx, dy := float64(x2-x1), float64(y2-y1)
	l := math.Hypot(dx, dy)
	if l == 0 {
		return x1, y1
	}
	return x1 + int(math.Round(dx*d/l)), y1 + int(math.Round(dy*d/l))
}

func svgPort(b *bufio.Writer, x, y int, port string) {
	if port == "" {
		return
	}
	fmt.Fprintf(b, `<text class="port mid" x="%d" y="%d">%s</text>`+"\n", x, y, esc(port))
}

// nodeSub is a node's second line: its kind, and its role if it has one.
func nodeSub(n NetNode) string {
	s := orDash(n.Kind)
	if n.Role != "" {
		s += " · " + n.Role
	}
	return s
}

// netSub is a network's second line: its CIDR, or that it is undeclared.
func netSub(g NetGroup) string {
	switch {
	case !g.Known:
		return "no Network object"
	case g.CIDR != "":
		return g.CIDR
	}
	return "-"
}
