package diagram

import (
	"bufio"
	"fmt"
	"io"
	"strings"
	"unicode/utf8"
)

// TextOptions adjust the text renderings.
type TextOptions struct {
	// Width is the terminal's width in columns, held to 80..200; 0 means
	// 120.
	Width int
}

func (o TextOptions) width() int {
	if o.Width == 0 {
		return 120
	}
	return min(200, max(80, o.Width))
}

// The text rack: a ruler of unitRuler columns, then racks of inner width
// between minInner and maxInner, each framed by two borders and followed by
// rackGap spaces.
const (
	unitRuler = 4
	minInner  = 26
	maxInner  = 40
	rackGap   = 2
)

// RacksText draws the racks side by side in their rows, unit by unit from
// the top, with a unit ruler on the left; empty units show a dot, units
// held outside the view are hatched, and what could not be drawn is listed
// below.
func RacksText(w io.Writer, v *Racks, opt TextOptions) error {
	b := bufio.NewWriter(w)
	nRacks, nItems := 0, 0
	for _, row := range v.Rows {
		nRacks += len(row.Racks)
		for _, r := range row.Racks {
			for _, s := range r.Slots {
				if s.Item != nil {
					nItems++
				}
			}
		}
	}
	fmt.Fprintf(b, "Racks of %s: %s, %s\n", v.Title, plural(nRacks, "rack"), plural(nItems, "resource"))
	width := opt.width()
	for _, row := range v.Rows {
		fits := max(1, (width-unitRuler)/(minInner+2+rackGap))
		perLine := min(len(row.Racks), fits)
		inner := min(maxInner, (width-unitRuler)/perLine-2-rackGap)
		for i := 0; i < len(row.Racks); i += perLine {
			band := row.Racks[i:min(i+perLine, len(row.Racks))]
			fmt.Fprintf(b, "\n%s\n", row.Label)
			textBand(b, band, inner)
		}
	}
	if len(v.Apart) > 0 {
		fmt.Fprintf(b, "\nNot drawn:\n")
		for _, a := range v.Apart {
			fmt.Fprintf(b, "  %s (%s): %s\n", a.Item.Name, orDash(a.Item.Kind), a.Reason)
		}
	}
	if len(v.Notes) > 0 {
		fmt.Fprintf(b, "\nNotes:\n")
		for _, n := range v.Notes {
			fmt.Fprintf(b, "  %s\n", n)
		}
	}
	return b.Flush()
}

// textBand draws racks side by side, bottoms aligned.
func textBand(b *bufio.Writer, racks []Rack, inner int) {
	top := 0
	cells := make([][]string, len(racks))
	for i, r := range racks {
		top = max(top, r.Units)
		cells[i] = rackLines(r, inner)
	}
	gap := strings.Repeat(" ", rackGap)
	blank := strings.Repeat(" ", inner+2)
	border := "+" + strings.Repeat("-", inner) + "+"
	var line strings.Builder
	emit := func() {
		b.WriteString(strings.TrimRight(line.String(), " "))
		b.WriteByte('\n')
		line.Reset()
	}
	// Two header lines: the rack's name, then where it stands and its
	// logical zone (the SVG adds the power and network zones).
	line.WriteString(strings.Repeat(" ", unitRuler))
	for _, r := range racks {
		line.WriteString(" " + pad(fit(r.Name, inner), inner) + " " + gap)
	}
	emit()
	line.WriteString(strings.Repeat(" ", unitRuler))
	for _, r := range racks {
		place := rackPosition(r)
		if r.Zone != "" {
			place += " " + r.Zone
		}
		line.WriteString(" " + pad(fit(strings.TrimSpace(place), inner), inner) + " " + gap)
	}
	emit()
	for u := top + 1; u >= 0; u-- {
		if u >= 1 && u <= top {
			fmt.Fprintf(&line, "%3d ", u)
		} else {
			line.WriteString(strings.Repeat(" ", unitRuler))
		}
		for i, r := range racks {
			switch {
			case u == 0 || u == r.Units+1:
				line.WriteString(border)
			case u > r.Units:
				line.WriteString(blank)
			default:
				line.WriteString("|" + cells[i][u] + "|")
			}
			line.WriteString(gap)
		}
		emit()
	}
}

// rackPosition is where a rack stands: "A/3" (row A, column 3).
func rackPosition(r Rack) string {
	if r.Row == "" && r.Column == 0 {
		return ""
	}
	return fmt.Sprintf("%s/%d", r.Row, r.Column)
}

// rackPlace is where a rack stands and its zones: logical, power, network.
func rackPlace(r Rack) string {
	var parts []string
	if p := rackPosition(r); p != "" {
		parts = append(parts, p)
	}
	for _, z := range []string{r.Zone, r.PowerZone, r.NetworkZone} {
		if z != "" {
			parts = append(parts, z)
		}
	}
	return strings.Join(parts, " ")
}

// rackLines is the inside of each unit of a rack, indexed by unit.
func rackLines(r Rack, inner int) []string {
	lines := make([]string, r.Units+1)
	for _, s := range r.Slots {
		switch {
		case s.Foreign:
			for u := s.Bottom; u <= s.Top; u++ {
				lines[u] = strings.Repeat("/", inner)
			}
		case s.Item == nil:
			lines[s.Top] = pad(" .", inner)
		default:
			content := itemLines(*s.Item, inner, s.Top-s.Bottom+1, r.Name, r.Floor)
			for i, u := 0, s.Top; u >= s.Bottom; i, u = i+1, u-1 {
				lines[u] = content[i]
			}
		}
	}
	return lines
}

// itemMore are the lines under a resource's first one, rows-1 of them at
// most: head (its model, say) if not empty, then what runs on it. Children
// that do not fit are counted on the last line ("+3 more"), or, when no
// line is left for them, in suffix ("+3") for the first line.
func itemMore(head string, children []Child, rows int) (suffix string, more []string) {
	if head != "" && rows > 1 {
		more = append(more, head)
	}
	switch room := rows - 1 - len(more); {
	case len(children) == 0:
	case len(children) <= room:
		for _, c := range children {
			more = append(more, "- "+c.Name)
		}
	case room <= 0:
		suffix = fmt.Sprintf("+%d", len(children))
	default:
		for _, c := range children[:room-1] {
			more = append(more, "- "+c.Name)
		}
		more = append(more, fmt.Sprintf("+%d more", len(children)-room+1))
	}
	return suffix, more
}

// itemLines are a resource's lines in its units: name and kind on the top
// one; on the ones below, marked with ':', its model and what runs on it.
// A name too long loses first the rack's or floor's name it begins with
// (prefixes), which the drawing shows above the rack.
func itemLines(it Item, inner, height int, prefixes ...string) []string {
	suffix, more := itemMore(it.Model, it.Children, height)
	kind := orDash(it.Kind)
	if suffix != "" {
		kind += " " + suffix
	}
	room := inner - 2
	nameRoom := room - 1 - runes(kind)
	first := ""
	if nameRoom < 6 {
		first = pad(shorten(it.Name, room, prefixes...), room)
	} else {
		name := shorten(it.Name, nameRoom, prefixes...)
		first = name + strings.Repeat(" ", room-runes(name)-runes(kind)) + kind
	}
	out := []string{" " + first + " "}
	for i := 1; i < height; i++ {
		text := ""
		if i-1 < len(more) {
			text = more[i-1]
		}
		out = append(out, pad(" : "+fit(text, inner-3), inner))
	}
	return out
}

// NetworkText lists the drawing tier by tier from the gateway down; each
// resource is shown with its cables to the tiers above and to its peers
// ("eth0 --- router:eth3": its port, then the other end), so that every
// cable is listed once, at its lower end; then the networks the start's
// ports carry.
func NetworkText(w io.Writer, n *Network, opt TextOptions) error {
	b := bufio.NewWriter(w)
	nNodes := 0
	for _, t := range n.Tiers {
		nNodes += len(t.Nodes)
	}
	fmt.Fprintf(b, "Network of %s\n%s in %s, %s\n", n.From, plural(nNodes, "resource"), plural(len(n.Tiers), "tier"), plural(len(n.Links), "link"))
	lower := map[string][]Link{}
	for _, l := range n.Links {
		lower[l.B] = append(lower[l.B], l)
	}
	width := opt.width()
	for _, t := range n.Tiers {
		fmt.Fprintf(b, "\n%s\n", t.Name)
		for _, node := range t.Nodes {
			mark := " "
			if node.Start {
				mark = "*"
			}
			what := orDash(node.Kind)
			if node.Member {
				what += "; on " + strings.Join(node.Networks, ", ")
			}
			fmt.Fprintf(b, "%s %s (%s)\n", mark, node.Name, what)
			for _, l := range lower[node.Name] {
				line := fmt.Sprintf("      %s --- %s:%s", orDash(l.BPort), l.A, orDash(l.APort))
				if runes(line) > width {
					line = fit(line, width)
				}
				fmt.Fprintln(b, line)
			}
		}
	}
	for _, g := range n.Networks {
		fmt.Fprintf(b, "\nnetwork %s", g.Name)
		if g.CIDR != "" {
			fmt.Fprintf(b, " %s", g.CIDR)
		}
		if g.Gateway != "" {
			fmt.Fprintf(b, " gateway %s", g.Gateway)
		}
		if !g.Known {
			b.WriteString(" (no Network object of that name)")
		}
		b.WriteByte('\n')
		nameW, portW := 0, 0
		for _, m := range g.Members {
			nameW, portW = max(nameW, runes(m.Resource)), max(portW, runes(m.Port))
		}
		for _, m := range g.Members {
			fmt.Fprintln(b, strings.TrimRight(fmt.Sprintf("  %s  %s  %s", pad(m.Resource, nameW), pad(m.Port, portW), m.Address), " "))
		}
	}
	if len(n.Notes) > 0 {
		fmt.Fprintf(b, "\nNotes:\n")
		for _, note := range n.Notes {
			fmt.Fprintf(b, "  %s\n", note)
		}
	}
	return b.Flush()
}

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func runes(s string) int { return utf8.RuneCountInString(s) }

// pad fills s with spaces to n columns.
func pad(s string, n int) string {
	if r := runes(s); r < n {
		return s + strings.Repeat(" ", n-r)
	}
	return s
}

// shorten fits name in n columns: if it is longer, the longest of prefixes
// it begins with (with its dash) is replaced by '~' ("rack-1-1-server3" in
// rack rack-1-1 is "~server3"), and what is still too long is cut by fit.
func shorten(name string, n int, prefixes ...string) string {
	if runes(name) <= n {
		return name
	}
	best := name
	for _, p := range prefixes {
		if p != "" && strings.HasPrefix(name, p+"-") && len(name)-len(p) < len(best) {
			best = "~" + name[len(p)+1:]
		}
	}
	return fit(best, n)
}

// fit cuts s to n columns, replacing a part with '~': resource names go
// from the general to the particular (floor-1-1-1-rack-1-2-server3), so a
// third of what fits is kept from the beginning and the rest from the end.
func fit(s string, n int) string {
	if runes(s) <= n {
		return s
	}
	if n <= 1 {
		return string([]rune(s)[:max(0, n)])
	}
	r := []rune(s)
	head := (n - 1) / 3
	tail := n - 1 - head
	return string(r[:head]) + "~" + string(r[len(r)-tail:])
}
