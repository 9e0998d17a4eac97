package promapi

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/unyo-ops/unyo/core/tsdb"
)

// Root-side evaluation works on dense series, as VictoriaMetrics' engine
// does: every series has one value per instant of the grid (the union of
// the instants in the clusters' answers), NaN where it has none. The
// functions below mirror VictoriaMetrics v1.150's app/vmselect/promql
// (aggr.go, transform.go, binary_op.go) so that root answers as one server
// holding every cluster's series would.

// vec is one dense series.
type vec struct {
	labels map[string]string
	v      []float64
}

// evalCtx is one evaluation's input: the clusters' answers and the grid.
type evalCtx struct {
	parts []Part
	grid  []int64       // instants in ms, ascending
	pos   map[int64]int // instant -> index in grid
}

func newEvalCtx(parts []Part) *evalCtx {
	pos := map[int64]int{}
	for _, p := range parts {
		for _, ss := range p.Series {
			for _, s := range ss {
				for _, pt := range s.Points {
					pos[pt.T.UnixMilli()] = 0
				}
			}
		}
	}
	grid := slices.Sorted(maps.Keys(pos))
	for i, t := range grid {
		pos[t] = i
	}
	return &evalCtx{parts: parts, grid: grid, pos: pos}
}

func (c *evalCtx) nan() []float64 {
	v := make([]float64, len(c.grid))
	for i := range v {
		v[i] = math.NaN()
	}
	return v
}

func (c *evalCtx) dense(s tsdb.Series, labels map[string]string) *vec {
	out := &vec{labels: labels, v: c.nan()}
	for _, p := range s.Points {
		out.v[c.pos[p.T.UnixMilli()]] = p.V
	}
	return out
}

// sparse turns dense series back into the API's form, without NaN points
// and empty series.
func (c *evalCtx) sparse(in []*vec) []tsdb.Series {
	out := make([]tsdb.Series, 0, len(in))
	for _, s := range in {
		var pts []tsdb.Point
		for i, v := range s.v {
			if !math.IsNaN(v) {
				pts = append(pts, tsdb.Point{T: time.UnixMilli(c.grid[i]), V: v})
			}
		}
		if len(pts) > 0 {
			out = append(out, tsdb.Series{Labels: s.labels, Points: pts})
		}
	}
	return out
}

func empty(s *vec) bool {
	for _, v := range s.v {
		if !math.IsNaN(v) {
			return false
		}
	}
	return true
}

func dropEmpty(in []*vec) []*vec {
	return slices.DeleteFunc(in, empty)
}

// --- leaves ---

// anyOne answers with the first cluster's answer: the expression has no
// selector, so every cluster's is the same.
type anyOne struct{ idx int }

func (a anyOne) eval(c *evalCtx) ([]*vec, error) {
	for _, p := range c.parts {
		var out []*vec
		for _, s := range p.Series[a.idx] {
			out = append(out, c.dense(s, s.Labels))
		}
		return out, nil
	}
	return nil, nil
}

// concat labels every series with its cluster.
type concat struct{ idx int }

func (n concat) eval(c *evalCtx) ([]*vec, error) {
	var out []*vec
	for _, p := range c.parts {
		for _, s := range p.Series[n.idx] {
			out = append(out, c.dense(s, withCluster(s.Labels, p.Cluster)))
		}
	}
	return out, nil
}

func withCluster(l map[string]string, cluster string) map[string]string {
	out := make(map[string]string, len(l)+1)
	maps.Copy(out, l)
	out[ClusterLabel] = cluster
	return out
}

// merged combines partial aggregates of equal label sets point by point.
type merged struct {
	idx int
	f   func(a, b float64) float64
}

func (m merged) eval(c *evalCtx) ([]*vec, error) {
	groups := map[string]*vec{}
	var out []*vec
	for _, p := range c.parts {
		for _, s := range p.Series[m.idx] {
			k := labelsKey(s.Labels)
			g := groups[k]
			if g == nil {
				g = c.dense(s, s.Labels)
				groups[k] = g
				out = append(out, g)
				continue
			}
			for _, pt := range s.Points {
				i := c.pos[pt.T.UnixMilli()]
				if math.IsNaN(g.v[i]) {
					g.v[i] = pt.V
				} else {
					g.v[i] = m.f(g.v[i], pt.V)
				}
			}
		}
	}
	return out, nil
}

// avgMerged is the combined sum over the combined count, per group.
type avgMerged struct{ sum, count merged }

func (a avgMerged) eval(c *evalCtx) ([]*vec, error) {
	return binary{op: "/", l: a.sum, r: a.count}.eval(c)
}

// varMerged combines per-cluster count, mean and variance of each group
// with Chan et al.'s parallel formula, which stays exact where the naive
// sum-of-squares difference cancels catastrophically.
type varMerged struct {
	count, mean, variance merged // only their idx is used
	sqrt                  bool   // stddev rather than stdvar
}

func (m varMerged) eval(c *evalCtx) ([]*vec, error) {
	type acc struct {
		out      *vec
		n, mean  []float64
		m2       []float64
		seenOnce []bool
	}
	groups := map[string]*acc{}
	var out []*vec
	for _, p := range c.parts {
		counts := map[string]tsdb.Series{}
		means := map[string]tsdb.Series{}
		for _, s := range p.Series[m.count.idx] {
			counts[labelsKey(s.Labels)] = s
		}
		for _, s := range p.Series[m.mean.idx] {
			means[labelsKey(s.Labels)] = s
		}
		for _, s := range p.Series[m.variance.idx] {
			k := labelsKey(s.Labels)
			g := groups[k]
			if g == nil {
				g = &acc{out: &vec{labels: s.Labels, v: c.nan()}, n: make([]float64, len(c.grid)), mean: make([]float64, len(c.grid)), m2: make([]float64, len(c.grid))}
				groups[k] = g
				out = append(out, g.out)
			}
			n, mu := c.dense(counts[k], nil).v, c.dense(means[k], nil).v
			for _, pt := range s.Points {
				i := c.pos[pt.T.UnixMilli()]
				nb, mb, m2b := n[i], mu[i], pt.V*n[i]
				if math.IsNaN(nb) || math.IsNaN(mb) {
					continue
				}
				na := g.n[i]
				delta := mb - g.mean[i]
				total := na + nb
				g.m2[i] += m2b + delta*delta*na*nb/total
				g.mean[i] += delta * nb / total
				g.n[i] = total
			}
		}
	}
	for _, g := range groups {
		for i, n := range g.n {
			if n == 0 {
				continue
			}
			v := g.m2[i] / n
			if m.sqrt {
				v = math.Sqrt(v)
			}
			g.out.v[i] = v
		}
	}
	return out, nil
}

// number is a literal operand.
type number float64

func (n number) eval(c *evalCtx) ([]*vec, error) {
	v := make([]float64, len(c.grid))
	for i := range v {
		v[i] = float64(n)
	}
	return []*vec{{labels: map[string]string{}, v: v}}, nil
}

// --- aggregations at root ---

// groupLabels is VictoriaMetrics' removeGroupTags: by keeps the named
// labels (the name only if named), without drops them and the name.
func groupLabels(l map[string]string, op string, args []string) map[string]string {
	out := map[string]string{}
	switch op {
	case "without":
		for k, v := range l {
			if k != "__name__" && !slices.Contains(args, k) {
				out[k] = v
			}
		}
	default:
		for _, a := range args {
			if v, ok := l[a]; ok {
				out[a] = v
			}
		}
	}
	return out
}

// aggr evaluates an aggregation over its argument's series at root.
type aggr struct {
	name  string
	op    string // "", by, without
	args  []string
	param float64 // k of topk/bottomk, φ of quantile
	label string  // count_values' label
	arg   node
}

// aggrFuncs are the aggregations root evaluates itself; each reduces
// one group's series.
var aggrFuncs = map[string]bool{
	"sum": true, "min": true, "max": true, "avg": true, "count": true, "group": true,
	"stddev": true, "stdvar": true, "topk": true, "bottomk": true, "quantile": true, "count_values": true,
}

func (a aggr) eval(c *evalCtx) ([]*vec, error) {
	in, err := a.arg.eval(c)
	if err != nil {
		return nil, err
	}
	in = dropEmpty(in)
	op, args := a.op, a.args
	if a.name == "count_values" {
		switch op {
		case "without":
			args = append(slices.Clone(args), a.label)
		case "by":
			args = slices.DeleteFunc(slices.Clone(args), func(s string) bool { return s == a.label })
		}
	}
	var keys []string
	groups := map[string][]*vec{}
	gl := map[string]map[string]string{}
	for _, s := range in {
		l := groupLabels(s.labels, op, args)
		k := labelsKey(l)
		if _, ok := groups[k]; !ok {
			keys = append(keys, k)
			gl[k] = l
		}
		groups[k] = append(groups[k], s)
	}
	var out []*vec
	for _, k := range keys {
		out = append(out, a.reduce(c, gl[k], groups[k])...)
	}
	return out, nil
}

func (a aggr) reduce(c *evalCtx, labels map[string]string, ss []*vec) []*vec {
	switch a.name {
	case "topk", "bottomk":
		return topk(ss, a.param, a.name == "bottomk")
	case "count_values":
		byValue := map[float64]*vec{}
		var out []*vec
		for _, s := range ss {
			for i, v := range s.v {
				if math.IsNaN(v) {
					continue
				}
				d := byValue[v]
				if d == nil {
					l := maps.Clone(labels)
					l[a.label] = strconv.FormatFloat(v, 'f', -1, 64)
					d = &vec{labels: l, v: c.nan()}
					byValue[v] = d
					out = append(out, d)
				}
				if math.IsNaN(d.v[i]) {
					d.v[i] = 1
				} else {
					d.v[i]++
				}
			}
		}
		return out
	}
	dst := &vec{labels: labels, v: c.nan()}
	vals := make([]float64, 0, len(ss))
	for i := range c.grid {
		vals = vals[:0]
		for _, s := range ss {
			if !math.IsNaN(s.v[i]) {
				vals = append(vals, s.v[i])
			}
		}
		if len(vals) == 0 {
			continue
		}
		dst.v[i] = reduceValues(a.name, a.param, vals, len(ss))
	}
	return []*vec{dst}
}

// reduceValues aggregates one instant's non-NaN values of a group of n
// series.
func reduceValues(name string, param float64, vals []float64, n int) float64 {
	switch name {
	case "sum":
		s := 0.0
		for _, v := range vals {
			s += v
		}
		return s
	case "min":
		return slices.Min(vals)
	case "max":
		return slices.Max(vals)
	case "avg":
		// VictoriaMetrics' avgValue: a running mean, which cannot
		// overflow.
		avg := 0.0
		for i, v := range vals {
			avg += (v - avg) / float64(i+1)
		}
		return avg
	case "count":
		return float64(len(vals))
	case "group":
		return 1
	case "stddev", "stdvar":
		if n == 1 {
			return 0
		}
		var avg, count, q float64
		for _, v := range vals {
			count++
			next := avg + (v-avg)/count
			q += (v - avg) * (v - next)
			avg = next
		}
		if name == "stddev" {
			return math.Sqrt(q / count)
		}
		return q / count
	case "quantile":
		sorted := slices.Clone(vals)
		sort.Float64s(sorted)
		return quantileSorted(param, sorted)
	}
	return math.NaN()
}

// quantileSorted is Prometheus' (and VictoriaMetrics') interpolation.
func quantileSorted(phi float64, values []float64) float64 {
	if len(values) == 0 || math.IsNaN(phi) {
		return math.NaN()
	}
	if phi < 0 {
		return math.Inf(-1)
	}
	if phi > 1 {
		return math.Inf(+1)
	}
	n := float64(len(values))
	rank := phi * (n - 1)
	lower := math.Max(0, math.Floor(rank))
	upper := math.Min(n-1, lower+1)
	weight := rank - math.Floor(rank)
	return values[int(lower)]*(1-weight) + values[int(upper)]*weight
}

// topk keeps, at every instant, the k greatest (bottomk: least) values and
// the series they belong to, labels unchanged.
func topk(ss []*vec, k float64, reverse bool) []*vec {
	ss = slices.Clone(ss)
	less := func(a, b float64) bool { // NaN sorts first
		if math.IsNaN(a) {
			return !math.IsNaN(b)
		}
		return !math.IsNaN(b) && a < b
	}
	if reverse {
		less = func(a, b float64) bool { // NaN sorts first
			if math.IsNaN(a) {
				return !math.IsNaN(b)
			}
			return !math.IsNaN(b) && a > b
		}
	}
	out := make([]*vec, len(ss))
	for i, s := range ss {
		out[i] = &vec{labels: s.labels, v: slices.Clone(s.v)}
	}
	order := slices.Clone(out)
	if len(out) == 0 {
		return nil
	}
	for i := range out[0].v {
		sort.SliceStable(order, func(a, b int) bool { return less(order[a].v[i], order[b].v[i]) })
		keep := max(0, int(k))
		for j := 0; j < len(order)-keep; j++ {
			order[j].v[i] = math.NaN()
		}
	}
	return dropEmpty(out)
}

// --- functions at root ---

// histogramQuantile is VictoriaMetrics' histogram_quantile(φ, buckets)
// over le buckets (vmrange buckets are refused when planning).
type histogramQuantile struct {
	phi float64
	arg node
}

type leVec struct {
	le float64
	s  *vec
}

func (h histogramQuantile) eval(c *evalCtx) ([]*vec, error) {
	in, err := h.arg.eval(c)
	if err != nil {
		return nil, err
	}
	groups := map[string][]leVec{}
	var keys []string
	for _, s := range in {
		le, err := strconv.ParseFloat(s.labels["le"], 64)
		if s.labels["le"] == "" || err != nil {
			continue
		}
		l := maps.Clone(s.labels)
		delete(l, "le")
		delete(l, "__name__")
		k := labelsKey(l)
		if _, ok := groups[k]; !ok {
			keys = append(keys, k)
		}
		groups[k] = append(groups[k], leVec{le: le, s: &vec{labels: l, v: slices.Clone(s.v)}})
	}
	var out []*vec
	for _, k := range keys {
		xss := groups[k]
		sort.SliceStable(xss, func(i, j int) bool { return xss[i].le < xss[j].le })
		xss = mergeSameLE(xss)
		dst := &vec{labels: xss[0].s.labels, v: c.nan()}
		for i := range dst.v {
			dst.v[i] = bucketQuantile(i, h.phi, xss)
		}
		out = append(out, dst)
	}
	return out, nil
}

func mergeSameLE(xss []leVec) []leVec {
	dst := xss[:1]
	for _, xs := range xss[1:] {
		last := dst[len(dst)-1]
		if xs.le != last.le {
			dst = append(dst, xs)
			continue
		}
		for k, v := range xs.s.v {
			last.s.v[k] += v
		}
	}
	return dst
}

func bucketQuantile(i int, phi float64, xss []leVec) float64 {
	if math.IsNaN(phi) {
		return math.NaN()
	}
	// fixBrokenBuckets: counts must not fall as le grows.
	if len(xss) >= 2 {
		prev := xss[0].s.v[i]
		if math.IsNaN(prev) {
			prev = 0
			xss[0].s.v[i] = 0
		}
		for j := 1; j < len(xss); j++ {
			if v := xss[j].s.v[i]; math.IsNaN(v) || prev > v {
				xss[j].s.v[i] = prev
			} else {
				prev = v
			}
		}
	}
	last := 0.0
	if len(xss) > 0 {
		last = xss[len(xss)-1].s.v[i]
	}
	if last == 0 || math.IsNaN(last) {
		return math.NaN()
	}
	if phi < 0 {
		return math.Inf(-1)
	}
	if phi > 1 {
		return math.Inf(1)
	}
	req := last * phi
	vPrev, lePrev := 0.0, 0.0
	for _, xs := range xss {
		v, le := xs.s.v[i], xs.le
		if v <= 0 {
			lePrev = le
			continue
		}
		if v < req {
			vPrev, lePrev = v, le
			continue
		}
		if math.IsInf(le, 0) {
			break
		}
		if v == vPrev {
			return lePrev
		}
		return lePrev + (le-lePrev)*(req-vPrev)/(v-vPrev)
	}
	for j := len(xss) - 1; j >= 0; j-- {
		if !math.IsInf(xss[j].le, 0) {
			return xss[j].le
		}
	}
	return math.NaN()
}

// scalarOf is scalar(): the only series' values, NaN unless exactly one.
type scalarOf struct{ arg node }

func (s scalarOf) eval(c *evalCtx) ([]*vec, error) {
	in, err := s.arg.eval(c)
	if err != nil {
		return nil, err
	}
	out := &vec{labels: map[string]string{}, v: c.nan()}
	if len(in) == 1 {
		copy(out.v, in[0].v)
	}
	return []*vec{out}, nil
}

// pointwise are the value-by-value functions root applies to what it
// computed; each drops the metric name, as in VictoriaMetrics.
var pointwise = map[string]func(v float64, args []float64) float64{
	"abs":       func(v float64, _ []float64) float64 { return math.Abs(v) },
	"ceil":      func(v float64, _ []float64) float64 { return math.Ceil(v) },
	"floor":     func(v float64, _ []float64) float64 { return math.Floor(v) },
	"sqrt":      func(v float64, _ []float64) float64 { return math.Sqrt(v) },
	"exp":       func(v float64, _ []float64) float64 { return math.Exp(v) },
	"ln":        func(v float64, _ []float64) float64 { return math.Log(v) },
	"log2":      func(v float64, _ []float64) float64 { return math.Log2(v) },
	"log10":     func(v float64, _ []float64) float64 { return math.Log10(v) },
	"clamp_min": func(v float64, a []float64) float64 { return math.Max(v, a[0]) },
	"clamp_max": func(v float64, a []float64) float64 { return math.Min(v, a[0]) },
	"clamp":     func(v float64, a []float64) float64 { return math.Min(math.Max(v, a[0]), a[1]) },
	"sgn": func(v float64, _ []float64) float64 {
		switch {
		case v > 0:
			return 1
		case v < 0:
			return -1
		}
		return v
	},
}

// pointwiseArgs is how many number arguments each pointwise function takes
// after the series.
var pointwiseArgs = map[string]int{"clamp_min": 1, "clamp_max": 1, "clamp": 2}

type apply struct {
	name     string
	args     []float64
	keepName bool
	arg      node
}

func (a apply) eval(c *evalCtx) ([]*vec, error) {
	in, err := a.arg.eval(c)
	if err != nil {
		return nil, err
	}
	f := pointwise[a.name]
	out := make([]*vec, len(in))
	for j, s := range in {
		d := &vec{labels: s.labels, v: make([]float64, len(s.v))}
		if !a.keepName {
			d.labels = withoutName(s.labels)
		}
		for i, v := range s.v {
			d.v[i] = f(v, a.args)
		}
		out[j] = d
	}
	return out, nil
}

// --- binary operators at root ---

var arith = map[string]func(a, b float64) float64{
	"+": func(a, b float64) float64 { return a + b },
	"-": func(a, b float64) float64 { return a - b },
	"*": func(a, b float64) float64 { return a * b },
	"/": func(a, b float64) float64 { return a / b },
	"%": math.Mod,
	"^": math.Pow,
}

var compare = map[string]func(a, b float64) bool{
	"==": func(a, b float64) bool { return a == b },
	"!=": func(a, b float64) bool { return a != b },
	">":  func(a, b float64) bool { return a > b },
	"<":  func(a, b float64) bool { return a < b },
	">=": func(a, b float64) bool { return a >= b },
	"<=": func(a, b float64) bool { return a <= b },
}

// binary applies an arithmetic or comparison operator with Prometheus'
// vector matching (on, ignoring, group_left, group_right), as
// VictoriaMetrics' binary_op.go does.
type binary struct {
	op         string
	isBool     bool
	on         string   // "", on, ignoring
	matchArgs  []string // labels of on/ignoring
	join       string   // "", group_left, group_right
	joinArgs   []string
	rightIsCmp bool // the right operand is a vector comparison: NaN there drops the point
	l, r       node
}

func isScalarVec(ss []*vec) bool { return len(ss) == 1 && len(ss[0].labels) == 0 }

func (b binary) value(a, c float64) float64 {
	if f, ok := arith[b.op]; ok {
		return f(a, c)
	}
	ok := compare[b.op](a, c)
	if !b.isBool {
		if ok {
			return a
		}
		return math.NaN()
	}
	switch {
	case math.IsNaN(a):
		return math.NaN()
	case ok:
		return 1
	}
	return 0
}

func (b binary) resetName(l map[string]string) map[string]string {
	if _, ok := compare[b.op]; ok && !b.isBool {
		return l
	}
	return withoutName(l)
}

func (b binary) eval(c *evalCtx) ([]*vec, error) {
	ls, err := b.l.eval(c)
	if err != nil {
		return nil, err
	}
	rs, err := b.r.eval(c)
	if err != nil {
		return nil, err
	}
	if b.op == "and" || b.op == "unless" {
		return b.filter(ls, rs), nil
	}
	if _, cmp := compare[b.op]; !cmp {
		ls, rs = dropEmpty(ls), dropEmpty(rs)
	}
	if len(ls) == 0 || len(rs) == 0 {
		return nil, nil
	}
	left, right, dst, err := b.pair(ls, rs)
	if err != nil {
		return nil, err
	}
	for i := range left {
		lv, rv, dv := left[i].v, right[i].v, dst[i].v
		for j := range lv {
			if b.rightIsCmp && math.IsNaN(rv[j]) && !math.IsNaN(lv[j]) {
				dv[j] = math.NaN()
				continue
			}
			dv[j] = b.value(lv[j], rv[j])
		}
	}
	return dst, nil
}

// filter is `and` (left's points where a matching right series has one)
// and `unless` (where none has), labels unchanged.
func (b binary) filter(ls, rs []*vec) []*vec {
	right := map[string][]*vec{}
	for _, s := range rs {
		k := b.matchKey(s.labels)
		right[k] = append(right[k], s)
	}
	var out []*vec
	for _, s := range ls {
		tr := right[b.matchKey(s.labels)]
		if len(tr) == 0 {
			if b.op == "unless" {
				out = append(out, s)
			}
			continue
		}
		d := &vec{labels: s.labels, v: slices.Clone(s.v)}
		for i := range d.v {
			has := slices.ContainsFunc(tr, func(r *vec) bool { return !math.IsNaN(r.v[i]) })
			if has == (b.op == "unless") {
				d.v[i] = math.NaN()
			}
		}
		if !empty(d) {
			out = append(out, d)
		}
	}
	return out
}

// matchKey is the label set series are matched on: all but the name, or
// as on/ignoring say.
func (b binary) matchKey(l map[string]string) string {
	l = withoutName(l)
	if b.on == "on" {
		return labelsKey(groupLabels(l, "by", b.matchArgs))
	}
	out := maps.Clone(l)
	for _, a := range b.matchArgs {
		delete(out, a)
	}
	return labelsKey(out)
}

// pair lines up the operands: left[i] op right[i] is written into dst[i].
func (b binary) pair(ls, rs []*vec) (left, right, dst []*vec, err error) {
	fresh := func(s *vec, labels map[string]string) *vec {
		return &vec{labels: labels, v: slices.Clone(s.v)}
	}
	if b.on == "" && b.join == "" {
		switch {
		case isScalarVec(ls):
			for _, r := range rs {
				left, right, dst = append(left, ls[0]), append(right, r), append(dst, fresh(r, b.resetName(r.labels)))
			}
			return left, right, dst, nil
		case isScalarVec(rs):
			for _, l := range ls {
				left, right, dst = append(left, l), append(right, rs[0]), append(dst, fresh(l, b.resetName(l.labels)))
			}
			return left, right, dst, nil
		}
	}
	byKey := func(ss []*vec) (map[string][]*vec, []string) {
		m := map[string][]*vec{}
		var order []string
		for _, s := range ss {
			k := b.matchKey(s.labels)
			if _, ok := m[k]; !ok {
				order = append(order, k)
			}
			m[k] = append(m[k], s)
		}
		return m, order
	}
	mLeft, order := byKey(ls)
	mRight, _ := byKey(rs)
	for _, k := range order {
		tl, tr := mLeft[k], mRight[k]
		if len(tr) == 0 {
			continue
		}
		switch b.join {
		case "group_left", "group_right":
			many, one := tl, tr
			if b.join == "group_right" {
				many, one = tr, tl
			}
			single, err := b.single(one, "one")
			if err != nil {
				return nil, nil, nil, err
			}
			for _, m := range many {
				l := maps.Clone(b.resetName(m.labels))
				for _, a := range b.joinArgs {
					if b.on == "on" && slices.Contains(b.matchArgs, a) {
						continue
					}
					if v, ok := single.labels[a]; ok {
						l[a] = v
					} else {
						delete(l, a)
					}
				}
				if b.join == "group_left" {
					left, right = append(left, m), append(right, single)
				} else {
					left, right = append(left, single), append(right, m)
				}
				dst = append(dst, fresh(m, l))
			}
		default:
			sl, err := b.single(tl, "left")
			if err != nil {
				return nil, nil, nil, err
			}
			sr, err := b.single(tr, "right")
			if err != nil {
				return nil, nil, nil, err
			}
			l := b.resetName(sl.labels)
			if b.on == "on" {
				l = groupLabels(l, "by", b.matchArgs)
			} else {
				l = maps.Clone(l)
				for _, a := range b.matchArgs {
					delete(l, a)
				}
			}
			left, right, dst = append(left, sl), append(right, sr), append(dst, fresh(sl, l))
		}
	}
	return left, right, dst, nil
}

// single is the one series of a match group; VictoriaMetrics merges series
// whose points do not overlap (a label changed value) and refuses others.
func (b binary) single(ss []*vec, side string) (*vec, error) {
	if len(ss) == 1 {
		return ss[0], nil
	}
	out := &vec{labels: ss[0].labels, v: slices.Clone(ss[0].v)}
	for _, s := range ss[1:] {
		overlaps := 0
		for i, v := range s.v {
			if !math.IsNaN(v) && !math.IsNaN(out.v[i]) {
				overlaps++
			}
		}
		if overlaps > 2 || len(s.v) <= 2 {
			return nil, fmt.Errorf("duplicate series on the %s side of %s: %s and %s", side, b.op, labelsString(ss[0].labels), labelsString(s.labels))
		}
		for i, v := range s.v {
			if !math.IsNaN(v) {
				out.v[i] = v
			}
		}
	}
	return out, nil
}

func labelsString(l map[string]string) string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(l)) {
		parts = append(parts, k+"="+strconv.Quote(l[k]))
	}
	return "{" + strings.Join(parts, ", ") + "}"
}

func withoutName(l map[string]string) map[string]string {
	if _, ok := l["__name__"]; !ok {
		return l
	}
	out := maps.Clone(l)
	delete(out, "__name__")
	return out
}
