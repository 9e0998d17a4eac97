package promapi

import (
	"maps"
	"math"
	"slices"
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
