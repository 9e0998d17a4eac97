package web

import (
	"fmt"
	"html"
	"math"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/unyo-ops/unyo/core/api/unyov1"
)

// formatValue shows a sample: ratios as percentages, else 3 significant
// digits.
func formatValue(v float64, unit string) string {
	if unit == "ratio" {
		return strconv.FormatFloat(v*100, 'f', 1, 64) + "%"
	}
	return strconv.FormatFloat(v, 'g', 3, 64)
}

func bounds(pts []*unyov1.Point) (t0, t1 int64, lo, hi float64) {
	lo, hi = math.Inf(1), math.Inf(-1)
	t0, t1 = math.MaxInt64, math.MinInt64
	for _, p := range pts {
		if math.IsNaN(p.GetValue()) || math.IsInf(p.GetValue(), 0) {
			continue
		}
		lo, hi = math.Min(lo, p.GetValue()), math.Max(hi, p.GetValue())
		t0, t1 = min(t0, p.GetTimeMs()), max(t1, p.GetTimeMs())
	}
	return
}

// sparkline draws points as a small line, hand-made SVG with a title for
// screen readers.
func sparkline(pts []*unyov1.Point, w, h int, title string) string {
	t0, t1, lo, hi := bounds(pts)
	var b strings.Builder
	fmt.Fprintf(&b, `<svg class="spark" role="img" width="%d" height="%d" viewBox="0 0 %d %d"><title>%s</title>`, w, h, w, h, html.EscapeString(title))
	if t1 > t0 {
		b.WriteString(`<polyline fill="none" stroke="currentColor" stroke-width="1.5" points="`)
		for _, p := range pts {
			x, y := scale(p, t0, t1, lo, hi, float64(w), float64(h-2))
			fmt.Fprintf(&b, "%.1f,%.1f ", x, y+1)
		}
		b.WriteString(`"/>`)
	}
	b.WriteString(`</svg>`)
	return b.String()
}

func scale(p *unyov1.Point, t0, t1 int64, lo, hi, w, h float64) (x, y float64) {
	x = float64(p.GetTimeMs()-t0) / float64(max(t1-t0, 1)) * w
	span := hi - lo
	if span == 0 {
		return x, h / 2
	}
	return x, h - (p.GetValue()-lo)/span*h
}

// chartColors are distinct in both themes (checked for contrast against
// both backgrounds in the tests).
var chartColors = []string{"#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#e377c2", "#8c564b", "#bcbd22", "#17becf"}

// lineChart draws series over a time range with axes and a legend: the
// metrics explorer's graph, readable without JavaScript.
func lineChart(series []*unyov1.Series, w, h int) string {
	const left, right, top, bottom = 60, 10, 10, 30
	var all []*unyov1.Point
	for _, s := range series {
		all = append(all, s.GetPoints()...)
	}
	t0, t1, lo, hi := bounds(all)
	var b strings.Builder
	fmt.Fprintf(&b, `<svg class="chart" role="img" aria-label="graph of %d series" width="100%%" viewBox="0 0 %d %d" preserveAspectRatio="none">`, len(series), w, h)
	pw, ph := float64(w-left-right), float64(h-top-bottom)
	fmt.Fprintf(&b, `<rect x="%d" y="%d" width="%.0f" height="%.0f" class="plot"/>`, left, top, pw, ph)
	if t1 <= t0 || math.IsInf(lo, 0) {
		b.WriteString(`<text x="70" y="40" class="axis">no data</text></svg>`)
		return b.String()
	}
	if hi == lo {
		hi, lo = hi+1, lo-1
	}
	for i := 0; i <= 4; i++ {
		v := lo + (hi-lo)*float64(i)/4
		y := float64(top) + ph - ph*float64(i)/4
		fmt.Fprintf(&b, `<line x1="%d" x2="%d" y1="%.1f" y2="%.1f" class="grid"/><text x="%d" y="%.1f" class="axis" text-anchor="end">%s</text>`,
			left, w-right, y, y, left-4, y+3, strconv.FormatFloat(v, 'g', 4, 64))
	}
	for i := 0; i <= 4; i++ {
		t := t0 + (t1-t0)*int64(i)/4
		x := float64(left) + pw*float64(i)/4
		fmt.Fprintf(&b, `<text x="%.1f" y="%d" class="axis" text-anchor="middle">%s</text>`, x, h-10, time.UnixMilli(t).UTC().Format("15:04"))
	}
	for i, s := range series {
		fmt.Fprintf(&b, `<polyline fill="none" stroke-width="1.5" stroke="%s" points="`, chartColors[i%len(chartColors)])
		for _, p := range s.GetPoints() {
			if math.IsNaN(p.GetValue()) {
				continue
			}
			x, y := scale(p, t0, t1, lo, hi, pw, ph)
			fmt.Fprintf(&b, "%.1f,%.1f ", x+left, y+top)
		}
		fmt.Fprintf(&b, `"><title>%s</title></polyline>`, html.EscapeString(seriesName(s)))
	}
	b.WriteString(`</svg>`)
	return b.String()
}

// seriesName is a series' labels as MetricsQL writes them.
func seriesName(s *unyov1.Series) string {
	ls := s.GetLabels()
	keys := make([]string, 0, len(ls))
	for k := range ls {
		if k != "__name__" {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s=%q", k, ls[k]))
	}
	return ls["__name__"] + "{" + strings.Join(parts, ", ") + "}"
}
