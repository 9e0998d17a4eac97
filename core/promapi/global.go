package promapi

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/VictoriaMetrics/metricsql"

	"github.com/unyo-ops/unyo/core/tsdb"
)

// ClusterLabel names the cluster a series comes from in root's answers.
const ClusterLabel = "cluster"

// A Plan is how root evaluates one expression over its clusters so that the
// answer is the one a single server holding every cluster's series (each
// with its cluster label) would give. Root pushes work down rather than
// pulling raw samples up (Promxy's way), because a dashboard's range query
// over many nodes would move every raw sample across the network:
//
//   - An expression without aggregation and without cross-series functions
//     (absent, scalar, ...) is evaluated by every cluster; root concatenates
//     the answers, each series labelled with its cluster. This is exact,
//     since such expressions act on each series (or on series matched by
//     labels, which include the cluster at root) separately.
//   - sum, min, max, count, group and avg at the top of the expression over
//     such an argument, with by, without or neither, are evaluated by every
//     cluster as partial aggregates (avg as sum and count), which root
//     combines per group: sum of sums, min of mins, sum of counts, sum of
//     sums over sum of counts. Grouping by cluster keeps clusters apart.
//   - Binary operations between such expressions (or numbers), for instance
//     100 * sum(rate(a[5m])) / sum(rate(b[5m])), are evaluated at root on
//     the combined operands, one-to-one on equal label sets (on, ignoring and
//     group_left/right are refused).
//   - An expression without any series selector (1+1, time()) is evaluated
//     by one cluster.
//
// Everything else (quantile, topk, stddev, histogram_quantile over an
// aggregation, absent, nested aggregations, ...) is refused with an error
// that says so; a single cluster's endpoint evaluates it.
type Plan struct {
	// Remote are the expressions each cluster evaluates.
	Remote []string
	root   node
}

// Part is one cluster's answers, one per Plan.Remote expression, in order.
type Part struct {
	Cluster string
	Series  [][]tsdb.Series
}

// ErrNotGlobal matches errors for expressions a Plan cannot evaluate across
// clusters.
var ErrNotGlobal = errors.New("cannot be evaluated across clusters")

// node is a piece of the root-side evaluation.
type node interface {
	eval(parts []Part) []tsdb.Series
}

// NewPlan plans expr; errors match ErrNotGlobal or are parse errors.
func NewPlan(expr string) (*Plan, error) {
	e, err := metricsql.Parse(expr)
	if err != nil {
		return nil, badData{fmt.Errorf("query %q: %w", expr, err)}
	}
	p := &Plan{}
	if !hasSelector(e) {
		p.Remote = []string{expr}
		p.root = anyOne{}
		return p, nil
	}
	n, err := p.plan(e)
	if err != nil {
		return nil, fmt.Errorf("query %q %w: %w (query one cluster's /clusters/NAME/api/v1/ endpoint instead)", expr, ErrNotGlobal, err)
	}
	p.root = n
	return p, nil
}

// Passthrough is the plan that has every cluster evaluate expr as it is
// and labels the answers with their cluster: exact for one cluster.
func Passthrough(expr string) *Plan {
	return &Plan{Remote: []string{expr}, root: concat{0}}
}

// Eval combines the clusters' answers.
func (p *Plan) Eval(parts []Part) []tsdb.Series { return p.root.eval(parts) }

func hasSelector(e metricsql.Expr) bool {
	found := false
	metricsql.VisitAll(e, func(x metricsql.Expr) {
		if _, ok := x.(*metricsql.MetricExpr); ok {
			found = true
		}
	})
	return found
}

// crossSeries are functions without aggregation syntax whose result
// depends on every series of the argument, so that per-cluster answers
// would differ from a global one.
var crossSeries = map[string]bool{
	"absent": true, "absent_over_time": true, "scalar": true, "limit_offset": true,
	"count_values": true, "range_normalize": true, "union": false,
}

// perSeries reports why e cannot be evaluated cluster by cluster, or "".
func perSeries(e metricsql.Expr) string {
	why := ""
	metricsql.VisitAll(e, func(x metricsql.Expr) {
		switch x := x.(type) {
		case *metricsql.AggrFuncExpr:
			why = fmt.Sprintf("%s() inside the expression (only one aggregation at the top is combined across clusters)", x.Name)
		case *metricsql.FuncExpr:
			if crossSeries[strings.ToLower(x.Name)] {
				why = fmt.Sprintf("%s() depends on all series at once", x.Name)
			}
		case *metricsql.BinaryOpExpr:
			if x.GroupModifier.Op != "" || x.JoinModifier.Op != "" {
				why = fmt.Sprintf("%s %s(...) may match series of different clusters", x.Op, x.GroupModifier.Op)
			}
		}
	})
	return why
}

func (p *Plan) remote(e metricsql.Expr) int {
	p.Remote = append(p.Remote, string(e.AppendString(nil)))
	return len(p.Remote) - 1
}

func (p *Plan) plan(e metricsql.Expr) (node, error) {
	switch x := e.(type) {
	case *metricsql.NumberExpr:
		return number(x.N), nil
	case *metricsql.AggrFuncExpr:
		return p.planAggr(x)
	case *metricsql.BinaryOpExpr:
		why := perSeries(x)
		if why == "" {
			return concat{p.remote(x)}, nil
		}
		if x.GroupModifier.Op != "" || x.JoinModifier.Op != "" {
			return nil, errors.New(why)
		}
		if x.KeepMetricNames || x.FillLeft != nil || x.FillRight != nil {
			return nil, fmt.Errorf("%s with keep_metric_names or fill over aggregations", x.Op)
		}
		if _, ok := binOps[x.Op]; !ok {
			return nil, fmt.Errorf("operator %s over aggregations", x.Op)
		}
		l, err := p.plan(x.Left)
		if err != nil {
			return nil, err
		}
		r, err := p.plan(x.Right)
		if err != nil {
			return nil, err
		}
		return binary{op: x.Op, isBool: x.Bool, l: l, r: r}, nil
	}
	if why := perSeries(e); why != "" {
		return nil, errors.New(why)
	}
	return concat{p.remote(e)}, nil
}

// combiners are the aggregations whose partial results combine exactly.
var combiners = map[string]func(a, b float64) float64{
	"sum":   func(a, b float64) float64 { return a + b },
	"count": func(a, b float64) float64 { return a + b },
	"min":   math.Min,
	"max":   math.Max,
	"group": func(float64, float64) float64 { return 1 },
}

func (p *Plan) planAggr(x *metricsql.AggrFuncExpr) (node, error) {
	name := strings.ToLower(x.Name)
	_, ok := combiners[name]
	if !ok && name != "avg" {
		return nil, fmt.Errorf("%s() does not combine from per-cluster parts (sum, min, max, count, group and avg do)", x.Name)
	}
	if x.Limit != 0 || len(x.Args) != 1 {
		return nil, fmt.Errorf("%s() with a limit or several arguments", x.Name)
	}
	if why := perSeries(x.Args[0]); why != "" {
		return nil, errors.New(why)
	}
	mod := x.Modifier
	mod.Args = slices.DeleteFunc(slices.Clone(mod.Args), func(s string) bool { return s == ClusterLabel })
	named := len(mod.Args) != len(x.Modifier.Args)
	// The cluster label survives `by (cluster)` and `without (other)`:
	// then groups never span clusters.
	keep := (mod.Op == "by" && named) || (mod.Op == "without" && !named)
	if mod.Op == "by" && len(mod.Args) == 0 {
		mod.Op = ""
	}
	push := func(fn string) int {
		return p.remote(&metricsql.AggrFuncExpr{Name: fn, Args: x.Args, Modifier: mod})
	}
	if name == "avg" {
		return avg{sum: merged{idx: push("sum"), keep: keep, f: combiners["sum"]}, count: merged{idx: push("count"), keep: keep, f: combiners["sum"]}}, nil
	}
	return merged{idx: push(name), keep: keep, f: combiners[name]}, nil
}

// anyOne answers with the first cluster's answer: the expression has no
// selector, so every cluster's is the same.
type anyOne struct{}

func (anyOne) eval(parts []Part) []tsdb.Series {
	for _, p := range parts {
		return p.Series[0]
	}
	return nil
}

// concat labels every series with its cluster.
type concat struct{ idx int }

func (c concat) eval(parts []Part) []tsdb.Series {
	var out []tsdb.Series
	for _, p := range parts {
		for _, s := range p.Series[c.idx] {
			out = append(out, withCluster(s, p.Cluster))
		}
	}
	return out
}

func withCluster(s tsdb.Series, cluster string) tsdb.Series {
	l := make(map[string]string, len(s.Labels)+1)
	maps.Copy(l, s.Labels)
	l[ClusterLabel] = cluster
	return tsdb.Series{Labels: l, Points: s.Points}
}

// merged combines partial aggregates of equal label sets point by point.
type merged struct {
	idx  int
	keep bool // groups keep the cluster label: concatenate
	f    func(a, b float64) float64
}

func (m merged) eval(parts []Part) []tsdb.Series {
	if m.keep {
		return concat{m.idx}.eval(parts)
	}
	type acc struct {
		labels map[string]string
		at     map[int64]float64
	}
	groups := map[string]*acc{}
	var order []string
	for _, p := range parts {
		for _, s := range p.Series[m.idx] {
			k := labelsKey(s.Labels)
			g := groups[k]
			if g == nil {
				g = &acc{labels: s.Labels, at: map[int64]float64{}}
				groups[k] = g
				order = append(order, k)
			}
			for _, pt := range s.Points {
				t := pt.T.UnixMilli()
				if old, ok := g.at[t]; ok {
					g.at[t] = m.f(old, pt.V)
				} else {
					g.at[t] = pt.V
				}
			}
		}
	}
	out := make([]tsdb.Series, 0, len(order))
	for _, k := range order {
		g := groups[k]
		out = append(out, tsdb.Series{Labels: g.labels, Points: points(g.at)})
	}
	return out
}

func points(at map[int64]float64) []tsdb.Point {
	ts := slices.Sorted(maps.Keys(at))
	out := make([]tsdb.Point, len(ts))
	for i, t := range ts {
		out[i] = tsdb.Point{T: time.UnixMilli(t), V: at[t]}
	}
	return out
}

// avg is the combined sum over the combined count, per group.
type avg struct{ sum, count merged }

func (a avg) eval(parts []Part) []tsdb.Series {
	return binary{op: "/", l: a.sum, r: a.count}.eval(parts)
}

// number is a literal operand.
type number float64

func (n number) eval([]Part) []tsdb.Series {
	return []tsdb.Series{{Points: []tsdb.Point{{V: float64(n)}}}}
}

var binOps = map[string]func(a, b float64) (float64, bool){
	"+":  func(a, b float64) (float64, bool) { return a + b, true },
	"-":  func(a, b float64) (float64, bool) { return a - b, true },
	"*":  func(a, b float64) (float64, bool) { return a * b, true },
	"/":  func(a, b float64) (float64, bool) { return a / b, true },
	"%":  func(a, b float64) (float64, bool) { return math.Mod(a, b), true },
	"^":  func(a, b float64) (float64, bool) { return math.Pow(a, b), true },
	"==": func(a, b float64) (float64, bool) { return cmp(a == b) },
	"!=": func(a, b float64) (float64, bool) { return cmp(a != b) },
	">":  func(a, b float64) (float64, bool) { return cmp(a > b) },
	"<":  func(a, b float64) (float64, bool) { return cmp(a < b) },
	">=": func(a, b float64) (float64, bool) { return cmp(a >= b) },
	"<=": func(a, b float64) (float64, bool) { return cmp(a <= b) },
}

func cmp(ok bool) (float64, bool) {
	if ok {
		return 1, true
	}
	return 0, false
}

// binary applies an arithmetic or comparison operator one-to-one on equal
// label sets (the metric name dropped, as Prometheus does), or between a
// vector and a number.
type binary struct {
	op     string
	isBool bool
	l, r   node
}

func (b binary) eval(parts []Part) []tsdb.Series {
	_, lNum := b.l.(number)
	_, rNum := b.r.(number)
	ls, rs := b.l.eval(parts), b.r.eval(parts)
	comparison := strings.ContainsAny(b.op, "=<>")
	apply := func(a, c float64) (float64, bool) {
		v, ok := binOps[b.op](a, c)
		if !comparison {
			return v, true
		}
		if b.isBool {
			return v, true
		}
		return a, ok
	}
	switch {
	case lNum && rNum:
		v, _ := binOps[b.op](ls[0].Points[0].V, rs[0].Points[0].V)
		return []tsdb.Series{{Points: []tsdb.Point{{V: v}}}}
	case rNum:
		return mapPoints(ls, func(v float64) (float64, bool) { return apply(v, rs[0].Points[0].V) }, comparison && !b.isBool)
	case lNum:
		return mapPoints(rs, func(v float64) (float64, bool) {
			x, ok := apply(ls[0].Points[0].V, v)
			if comparison && !b.isBool {
				return v, ok
			}
			return x, ok
		}, comparison && !b.isBool)
	}
	right := map[string]tsdb.Series{}
	for _, s := range rs {
		right[labelsKey(withoutName(s.Labels))] = s
	}
	var out []tsdb.Series
	for _, s := range ls {
		o, ok := right[labelsKey(withoutName(s.Labels))]
		if !ok {
			continue
		}
		at := map[int64]float64{}
		for _, p := range o.Points {
			at[p.T.UnixMilli()] = p.V
		}
		var pts []tsdb.Point
		for _, p := range s.Points {
			c, ok := at[p.T.UnixMilli()]
			if !ok {
				continue
			}
			if v, keep := apply(p.V, c); keep {
				pts = append(pts, tsdb.Point{T: p.T, V: v})
			}
		}
		if len(pts) > 0 {
			labels := s.Labels
			if !comparison || b.isBool {
				labels = withoutName(s.Labels)
			}
			out = append(out, tsdb.Series{Labels: labels, Points: pts})
		}
	}
	return out
}

// mapPoints applies f to every point; keepName keeps the metric name (a
// filtering comparison).
func mapPoints(in []tsdb.Series, f func(float64) (float64, bool), keepName bool) []tsdb.Series {
	var out []tsdb.Series
	for _, s := range in {
		var pts []tsdb.Point
		for _, p := range s.Points {
			if v, ok := f(p.V); ok {
				pts = append(pts, tsdb.Point{T: p.T, V: v})
			}
		}
		if len(pts) == 0 {
			continue
		}
		labels := s.Labels
		if !keepName {
			labels = withoutName(labels)
		}
		out = append(out, tsdb.Series{Labels: labels, Points: pts})
	}
	return out
}

func withoutName(l map[string]string) map[string]string {
	if _, ok := l["__name__"]; !ok {
		return l
	}
	out := maps.Clone(l)
	delete(out, "__name__")
	return out
}
