package promapi

import (
	"maps"
	"math"
	"slices"
	"sort"
	"strconv"
)

// Functions root evaluates itself (see eval.go).

// histogramQuantile is VictoriaMetrics' histogram_quantile(φ, buckets)
// over Prometheus' le buckets; series with VictoriaMetrics' own vmrange
// buckets are ignored here (the engine converts them, root does not).
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
