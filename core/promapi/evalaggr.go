package promapi

import (
	"maps"
	"math"
	"slices"
	"sort"
	"strconv"
)

// Aggregations root evaluates itself (see eval.go).

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
