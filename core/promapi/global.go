package promapi

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"

	"github.com/VictoriaMetrics/metricsql"

	"github.com/unyo-ops/unyo/core/tsdb"
)

// ClusterLabel names the cluster a series comes from in root's answers.
const ClusterLabel = "cluster"

// A Plan is how root evaluates one expression over its clusters so that the
// answer is the one a single server holding every cluster's series (each
// with its cluster label) would give. Root pushes down as much as is exact
// and evaluates the rest itself:
//
//   - A part of the expression that acts on each series separately (a
//     selector, rate(), arithmetic between series matched on all their
//     labels, histogram_quantile over raw buckets, ...) is evaluated by every
//     cluster; root concatenates the answers, each series labelled with its
//     cluster. This is exact, since at root the cluster label keeps series
//     of different clusters apart.
//   - sum, min, max, count, group, avg, stddev and stdvar over such a part,
//     with by, without or neither, are evaluated by every cluster as partial
//     aggregates (avg as sum and count; stddev and stdvar as count, avg and
//     stdvar, combined with Chan's parallel formula), which root combines
//     per group. Grouping by cluster keeps clusters apart.
//   - topk and bottomk over such a part: every cluster answers its own topk,
//     and root takes the topk of their union (the global top k are among
//     the clusters' top k at every instant).
//   - Everything else root evaluates itself over the combined answers of
//     its operands, as VictoriaMetrics' engine would: quantile, count_values,
//     aggregations over aggregations (count(count by (cpu) (x))),
//     histogram_quantile over sum by (le), scalar(), arithmetic, comparisons,
//     and and unless, with on, ignoring, group_left and group_right, a few value-by-value
//     functions (abs, ceil, clamp, ...). Where an operand cannot be pushed
//     down as a partial aggregate, its series are fetched as the clusters
//     evaluate them (a selector's values at each step, or rate()'s): this
//     is bounded by Limits.
//   - An expression without any series selector (1+1, time()) is evaluated
//     by one cluster.
//
// What remains is refused with an error matching ErrNotGlobal that names
// the function: subqueries over aggregations, absent(), label_replace()
// and other functions of a computed result; one cluster's endpoint
// evaluates them.
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

// Limits bound what root gathers from the clusters for one query that it
// evaluates itself (not for answers it only concatenates, which each
// cluster bounds).
type Limits struct {
	// MaxSeries is the most series the clusters' answers may hold
	// together. Default 100,000.
	MaxSeries int
	// MaxPoints is the most points they may hold together. Default
	// 10,000,000 (about 160 MB at root while evaluating).
	MaxPoints int
}

func (l Limits) withDefaults() Limits {
	if l.MaxSeries <= 0 {
		l.MaxSeries = 100_000
	}
	if l.MaxPoints <= 0 {
		l.MaxPoints = 10_000_000
	}
	return l
}

// PlanOptions tune planning.
type PlanOptions struct {
	// NoPartials never pushes partial aggregates down: every aggregation
	// is evaluated at root over its argument's series (Promxy's way).
	// Slower and bounded by Limits; for comparison in benchmarks.
	NoPartials bool
}

// node is a piece of the root-side evaluation.
type node interface {
	eval(c *evalCtx) ([]*vec, error)
}

// NewPlan plans expr; errors match ErrNotGlobal or are parse errors.
func NewPlan(expr string) (*Plan, error) { return NewPlanWith(expr, PlanOptions{}) }

// NewPlanWith plans expr with options.
func NewPlanWith(expr string, o PlanOptions) (*Plan, error) {
	e, err := metricsql.Parse(expr)
	if err != nil {
		return nil, badData{fmt.Errorf("query %q: %w", expr, err)}
	}
	p := &Plan{}
	if !hasSelector(e) {
		p.Remote = []string{expr}
		p.root = anyOne{0}
		return p, nil
	}
	pl := planner{Plan: p, o: o}
	n, err := pl.plan(e)
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

// Check refuses parts larger than l when root evaluates over them (a
// plain concatenation is bounded by each cluster). The error matches
// tsdb.ErrTooLarge and names the limit.
func (p *Plan) Check(parts []Part, l Limits) error {
	if _, ok := p.root.(concat); ok {
		return nil
	}
	l = l.withDefaults()
	series, points := 0, 0
	for _, part := range parts {
		for _, ss := range part.Series {
			series += len(ss)
			for _, s := range ss {
				points += len(s.Points)
			}
		}
	}
	if series > l.MaxSeries {
		return tsdb.TooLarge("root.query_max_series", fmt.Errorf("root would evaluate over %d series from the clusters, more than %d; narrow the selectors or aggregate by fewer labels", series, l.MaxSeries))
	}
	if points > l.MaxPoints {
		return tsdb.TooLarge("root.query_max_points", fmt.Errorf("root would evaluate over %d points from the clusters, more than %d; narrow the selectors or the time range, or raise the step", points, l.MaxPoints))
	}
	return nil
}

// Eval combines the clusters' answers.
func (p *Plan) Eval(parts []Part) ([]tsdb.Series, error) {
	c := newEvalCtx(parts)
	out, err := p.root.eval(c)
	if err != nil {
		return nil, fmt.Errorf("evaluate at root: %w", err)
	}
	return c.sparse(out), nil
}

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
			why = fmt.Sprintf("%s() inside the expression", x.Name)
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

type planner struct {
	*Plan
	o PlanOptions
}

func (p planner) remote(e metricsql.Expr) int {
	p.Remote = append(p.Remote, string(e.AppendString(nil)))
	return len(p.Remote) - 1
}

func (p planner) plan(e metricsql.Expr) (node, error) {
	if x, ok := e.(*metricsql.NumberExpr); ok {
		return number(x.N), nil
	}
	if !hasSelector(e) {
		return anyOne{p.remote(e)}, nil
	}
	if perSeries(e) == "" {
		return concat{p.remote(e)}, nil
	}
	switch x := e.(type) {
	case *metricsql.AggrFuncExpr:
		return p.planAggr(x)
	case *metricsql.BinaryOpExpr:
		return p.planBinary(x)
	case *metricsql.FuncExpr:
		return p.planFunc(x)
	case *metricsql.RollupExpr:
		return nil, errors.New("a subquery or offset over an aggregation or a cross-series function")
	}
	return nil, fmt.Errorf("%s", perSeries(e))
}

func (p planner) planBinary(x *metricsql.BinaryOpExpr) (node, error) {
	_, isArith := arith[x.Op]
	_, isCmp := compare[x.Op]
	isSet := x.Op == "and" || x.Op == "unless"
	if !isArith && !isCmp && !isSet {
		return nil, fmt.Errorf("operator %s over series of several clusters", x.Op)
	}
	if x.KeepMetricNames || x.FillLeft != nil || x.FillRight != nil || x.JoinModifierPrefix != nil {
		return nil, fmt.Errorf("%s with keep_metric_names, fill or a join prefix over series of several clusters", x.Op)
	}
	if isSet && x.JoinModifier.Op != "" {
		return nil, fmt.Errorf("%s with %s", x.Op, x.JoinModifier.Op)
	}
	if slices.Contains(x.JoinModifier.Args, "*") {
		return nil, fmt.Errorf("%s %s(*) over series of several clusters", x.Op, x.JoinModifier.Op)
	}
	l, err := p.plan(x.Left)
	if err != nil {
		return nil, err
	}
	r, err := p.plan(x.Right)
	if err != nil {
		return nil, err
	}
	b := binary{op: x.Op, isBool: x.Bool, l: l, r: r,
		on: strings.ToLower(x.GroupModifier.Op), matchArgs: x.GroupModifier.Args,
		join: strings.ToLower(x.JoinModifier.Op), joinArgs: x.JoinModifier.Args}
	if isCmp {
		b.rightIsCmp = isVectorComparison(x.Right)
	}
	return b, nil
}

// isVectorComparison is VictoriaMetrics' isVectorComparisonExpr: a
// comparison that is not between scalars.
func isVectorComparison(e metricsql.Expr) bool {
	be, ok := e.(*metricsql.BinaryOpExpr)
	if !ok {
		return false
	}
	if _, cmp := compare[be.Op]; !cmp {
		return false
	}
	return !isScalarLike(be.Left) || !isScalarLike(be.Right)
}

func isScalarLike(e metricsql.Expr) bool {
	switch e := e.(type) {
	case *metricsql.NumberExpr, *metricsql.DurationExpr:
		return true
	case *metricsql.BinaryOpExpr:
		return isScalarLike(e.Left) && isScalarLike(e.Right)
	case *metricsql.FuncExpr:
		switch strings.ToLower(e.Name) {
		case "now", "pi", "scalar", "start", "end", "step", "time", "timezone_offset":
			return true
		}
	}
	return false
}

func (p planner) planFunc(x *metricsql.FuncExpr) (node, error) {
	name := strings.ToLower(x.Name)
	numbers := func(args []metricsql.Expr) ([]float64, error) {
		out := make([]float64, len(args))
		for i, a := range args {
			n, ok := a.(*metricsql.NumberExpr)
			if !ok {
				return nil, fmt.Errorf("%s() with an argument other than a number over series of several clusters", x.Name)
			}
			out[i] = n.N
		}
		return out, nil
	}
	switch {
	case name == "histogram_quantile" && len(x.Args) == 2:
		phi, err := numbers(x.Args[:1])
		if err != nil {
			return nil, err
		}
		arg, err := p.plan(x.Args[1])
		if err != nil {
			return nil, err
		}
		return histogramQuantile{phi: phi[0], arg: arg}, nil
	case name == "scalar" && len(x.Args) == 1:
		arg, err := p.plan(x.Args[0])
		if err != nil {
			return nil, err
		}
		return scalarOf{arg}, nil
	case pointwise[name] != nil && len(x.Args) == 1+pointwiseArgs[name]:
		nums, err := numbers(x.Args[1:])
		if err != nil {
			return nil, err
		}
		arg, err := p.plan(x.Args[0])
		if err != nil {
			return nil, err
		}
		return apply{name: name, args: nums, keepName: x.KeepMetricNames, arg: arg}, nil
	}
	if why := perSeries(x); strings.HasPrefix(why, x.Name+"()") {
		return nil, errors.New(why)
	}
	return nil, fmt.Errorf("%s() over an aggregation or a cross-series function (root computes histogram_quantile, scalar, abs, ceil, floor, sqrt, exp, ln, log2, log10, sgn and clamp* itself)", x.Name)
}

// combiners are the aggregations whose partial results combine exactly.
var combiners = map[string]func(a, b float64) float64{
	"sum":   func(a, b float64) float64 { return a + b },
	"count": func(a, b float64) float64 { return a + b },
	"min":   math.Min,
	"max":   math.Max,
	"group": func(float64, float64) float64 { return 1 },
}

func (p planner) planAggr(x *metricsql.AggrFuncExpr) (node, error) {
	name := strings.ToLower(x.Name)
	if !aggrFuncs[name] {
		return nil, fmt.Errorf("%s() over series of several clusters (root computes %s)", x.Name, strings.Join(slices.Sorted(maps.Keys(aggrFuncs)), ", "))
	}
	if x.Limit != 0 {
		return nil, fmt.Errorf("%s() with a limit over series of several clusters", x.Name)
	}
	a := aggr{name: name, op: strings.ToLower(x.Modifier.Op), args: x.Modifier.Args}
	want := 1
	switch name {
	case "topk", "bottomk", "quantile", "count_values":
		want = 2
	}
	if len(x.Args) != want {
		return nil, fmt.Errorf("%s() takes %d arguments", x.Name, want)
	}
	if want == 2 {
		switch v := x.Args[0].(type) {
		case *metricsql.NumberExpr:
			a.param = v.N
		case *metricsql.StringExpr:
			a.label = v.S
		}
		if (name == "count_values") != (a.label != "") {
			return nil, fmt.Errorf("%s()'s first argument must be a literal %s", x.Name, map[bool]string{true: "string", false: "number"}[name == "count_values"])
		}
	}
	arg := x.Args[len(x.Args)-1]
	if perSeries(arg) == "" && !p.o.NoPartials {
		if n := p.partial(x, name, arg); n != nil {
			return n, nil
		}
	}
	var err error
	if a.arg, err = p.plan(arg); err != nil {
		return nil, err
	}
	return a, nil
}

// partial pushes aggregation x of a per-series argument down as partial
// aggregates, or returns nil when they do not combine.
func (p planner) partial(x *metricsql.AggrFuncExpr, name string, arg metricsql.Expr) node {
	mod := x.Modifier
	mod.Args = slices.DeleteFunc(slices.Clone(mod.Args), func(s string) bool { return s == ClusterLabel })
	named := len(mod.Args) != len(x.Modifier.Args)
	// The cluster label survives `by (cluster)` and `without (other)`:
	// then groups never span clusters.
	keep := (mod.Op == "by" && named) || (mod.Op == "without" && !named)
	if mod.Op == "by" && len(mod.Args) == 0 {
		mod.Op = ""
	}
	if keep {
		// Every group lies in one cluster: its answer is the cluster's.
		return concat{p.remote(&metricsql.AggrFuncExpr{Name: x.Name, Args: x.Args, Modifier: mod})}
	}
	push := func(fn string, args ...metricsql.Expr) merged {
		return merged{idx: p.remote(&metricsql.AggrFuncExpr{Name: fn, Args: args, Modifier: mod}), f: combiners[fn]}
	}
	switch name {
	case "sum", "count", "min", "max", "group":
		return push(name, arg)
	case "avg":
		return avgMerged{sum: push("sum", arg), count: push("count", arg)}
	case "stddev", "stdvar":
		return varMerged{count: push("count", arg), mean: push("avg", arg), variance: push("stdvar", arg), sqrt: name == "stddev"}
	case "topk", "bottomk":
		// Each cluster's own top k (grouped as asked, less the cluster
		// label) hold the global top k at every instant.
		top := concat{p.remote(&metricsql.AggrFuncExpr{Name: name, Args: x.Args, Modifier: mod})}
		return aggr{name: name, op: strings.ToLower(x.Modifier.Op), args: x.Modifier.Args, param: x.Args[0].(*metricsql.NumberExpr).N, arg: top}
	}
	return nil
}
