package promapi

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/unyo-ops/unyo/core/tsdb"
)

func at(v float64) []tsdb.Point { return []tsdb.Point{{T: time.UnixMilli(1000), V: v}} }

func TestPlanRemote(t *testing.T) {
	tests := []struct {
		expr string
		want []string // the expressions pushed to every cluster
		err  string
	}{
		{"node_load1", []string{"node_load1"}, ""},
		{"rate(x[5m]) * 8", []string{"rate(x[5m]) * 8"}, ""},
		{"sum(rate(x[5m]))", []string{"sum(rate(x[5m]))"}, ""},
		{"avg by (job) (x)", []string{"sum(x) by(job)", "count(x) by(job)"}, ""},
		{"sum by (cluster, job) (x)", []string{"sum(x) by(job)"}, ""},
		{"sum by (cluster) (x)", []string{"sum(x)"}, ""},
		{"max without (node) (x)", []string{"max(x) without(node)"}, ""},
		{"sum(a) / sum(b)", []string{"sum(a)", "sum(b)"}, ""},
		{"topk(3, x)", []string{"topk(3, x)"}, ""},
		{"bottomk by (job) (3, x)", []string{"bottomk(3, x) by(job)"}, ""},
		{"stddev by (job) (x)", []string{"count(x) by(job)", "avg(x) by(job)", "stdvar(x) by(job)"}, ""},
		{"quantile by (cluster) (0.5, x)", []string{"quantile(0.5, x)"}, ""},
		{"quantile(0.5, rate(x[5m]))", []string{"rate(x[5m])"}, ""},
		{"count_values(\"v\", x)", []string{"x"}, ""},
		{"sum(sum by (node) (x))", []string{"sum(x) by(node)"}, ""},
		{"count(count by (cpu) (x))", []string{"count(x) by(cpu)"}, ""},
		{"histogram_quantile(0.9, sum by (le) (rate(h[5m])))", []string{"sum(rate(h[5m])) by(le)"}, ""},
		{"histogram_quantile(0.9, rate(h[5m]))", []string{"histogram_quantile(0.9, rate(h[5m]))"}, ""},
		{"scalar(x) * 100 / count(y)", []string{"x", "count(y)"}, ""},
		{"a * on(node) group_left b", []string{"a", "b"}, ""},
		{"round(sum(x))", nil, "round() over an aggregation"},
		{"absent(x)", nil, "absent() depends on all series"},
		{"max_over_time(sum(x)[5m:1m])", nil, "max_over_time() over an aggregation"},
		{"sum(x) limit 3", nil, "with a limit"},
		{"a and on(node) b", []string{"a", "b"}, ""},
		{"a or on(node) b", nil, "operator or"},
	}
	for _, tt := range tests {
		t.Run(tt.expr, func(t *testing.T) {
			p, err := NewPlan(tt.expr)
			if tt.err != "" {
				if !errors.Is(err, ErrNotGlobal) || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("err %v, want ErrNotGlobal naming %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(p.Remote, tt.want) {
				t.Errorf("remote %q, want %q", p.Remote, tt.want)
			}
		})
	}
}

func TestPlanEval(t *testing.T) {
	job := func(j string, v float64) tsdb.Series {
		return tsdb.Series{Labels: map[string]string{"job": j}, Points: at(v)}
	}
	le := func(le string, v float64) tsdb.Series {
		return tsdb.Series{Labels: map[string]string{"le": le}, Points: at(v)}
	}
	node := func(n, role string, v float64) tsdb.Series {
		l := map[string]string{"node": n}
		if role != "" {
			l["role"] = role
		}
		return tsdb.Series{Labels: l, Points: at(v)}
	}
	tests := []struct {
		expr  string
		parts []Part
		want  string
	}{
		{"sum by (job) (x)", []Part{
			{"c1", [][]tsdb.Series{{job("a", 1), job("b", 2)}}},
			{"c2", [][]tsdb.Series{{job("a", 10)}}},
		}, "map[job:a]=11 map[job:b]=2"},
		{"max(x)", []Part{{"c1", [][]tsdb.Series{{{Points: at(3)}}}}, {"c2", [][]tsdb.Series{{{Points: at(7)}}}}}, "map[]=7"},
		{"count(x)", []Part{{"c1", [][]tsdb.Series{{{Points: at(3)}}}}, {"c2", [][]tsdb.Series{{{Points: at(7)}}}}}, "map[]=10"},
		// avg = (sum 6 + sum 30) / (count 2 + count 3)
		{"avg(x)", []Part{{"c1", [][]tsdb.Series{{{Points: at(6)}}, {{Points: at(2)}}}}, {"c2", [][]tsdb.Series{{{Points: at(30)}}, {{Points: at(3)}}}}}, "map[]=7.2"},
		{"sum by (cluster) (x)", []Part{{"c1", [][]tsdb.Series{{{Points: at(6)}}}}, {"c2", [][]tsdb.Series{{{Points: at(30)}}}}}, "map[cluster:c1]=6 map[cluster:c2]=30"},
		{"sum(x) > 10", []Part{{"c1", [][]tsdb.Series{{{Points: at(6)}}}}, {"c2", [][]tsdb.Series{{{Points: at(3)}}}}}, ""},
		{"sum(x) > bool 5", []Part{{"c1", [][]tsdb.Series{{{Points: at(6)}}}}, {"c2", [][]tsdb.Series{{{Points: at(3)}}}}}, "map[]=1"},
		// count, avg and stdvar of {1, 3} and of {6}: the stddev of {1, 3, 6}.
		{"stddev(x)", []Part{{"c1", [][]tsdb.Series{{{Points: at(2)}}, {{Points: at(2)}}, {{Points: at(1)}}}}, {"c2", [][]tsdb.Series{{{Points: at(1)}}, {{Points: at(6)}}, {{Points: at(0)}}}}}, "map[]=2.0548046676563256"},
		{"topk(1, x)", []Part{{"c1", [][]tsdb.Series{{job("a", 5)}}}, {"c2", [][]tsdb.Series{{job("b", 7)}}}}, "map[cluster:c2 job:b]=7"},
		// Buckets summed over clusters (2, 8, 8), then the quantile.
		{"histogram_quantile(0.5, sum by (le) (h))", []Part{
			{"c1", [][]tsdb.Series{{le("1", 2), le("2", 4), le("+Inf", 4)}}},
			{"c2", [][]tsdb.Series{{le("1", 0), le("2", 4), le("+Inf", 4)}}},
		}, "map[]=1.3333333333333333"},
		{"a / on(node) group_left(role) b", []Part{
			{"c1", [][]tsdb.Series{{node("n1", "", 6), node("n2", "", 8)}, {node("n1", "db", 2)}}},
			{"c2", [][]tsdb.Series{{}, {node("n2", "web", 4)}}},
		}, "map[cluster:c1 node:n1 role:db]=3 map[cluster:c1 node:n2 role:web]=2"},
		{"up", []Part{{"c1", [][]tsdb.Series{{{Labels: map[string]string{"__name__": "up"}, Points: at(1)}}}}}, "map[__name__:up cluster:c1]=1"},
	}
	for _, tt := range tests {
		t.Run(tt.expr, func(t *testing.T) {
			p, err := NewPlan(tt.expr)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			res, err := p.Eval(tt.parts)
			if err != nil {
				t.Fatal(err)
			}
			for _, s := range res {
				got = append(got, fmt.Sprintf("%v=%v", s.Labels, s.Points[len(s.Points)-1].V))
			}
			slices.Sort(got)
			if strings.Join(got, " ") != tt.want {
				t.Errorf("got %q, want %q", strings.Join(got, " "), tt.want)
			}
		})
	}
}
