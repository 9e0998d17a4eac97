package heal

import (
	"strings"
	"testing"
	"time"
)

var t0 = time.Date(2026, 11, 26, 6, 0, 0, 0, time.UTC)

func TestBackoff(t *testing.T) {
	for _, tc := range []struct {
		n    int
		want time.Duration
	}{
		{1, 10 * time.Second}, {2, 20 * time.Second}, {3, 40 * time.Second},
		{5, 160 * time.Second}, {6, 5 * time.Minute}, {60, 5 * time.Minute},
	} {
		if got := Backoff(tc.n); got != tc.want {
			t.Errorf("Backoff(%d) = %s, want %s", tc.n, got, tc.want)
		}
	}
}

func TestFailedAndNextAttempt(t *testing.T) {
	r := Failed(Retry{}, "n1", t0)
	if r != (Retry{Node: "n1", Failures: 1, NextAt: t0.Add(10 * time.Second)}) {
		t.Fatalf("first failure: %+v", r)
	}
	if a := NextAttempt(r, t0.Add(9*time.Second)); a != Wait {
		t.Errorf("before the backoff: %s", a)
	}
	if a := NextAttempt(r, t0.Add(10*time.Second)); a != RetryInPlace {
		t.Errorf("after the backoff: %s", a)
	}
	r = Failed(r, "n1", t0.Add(10*time.Second))
	if r.Failures != 2 || !r.NextAt.Equal(t0.Add(30*time.Second)) || Avoid(r) {
		t.Errorf("second failure: %+v", r)
	}
	r = Failed(r, "n1", t0.Add(30*time.Second))
	if a := NextAttempt(r, t0.Add(70*time.Second)); a != Move || !Avoid(r) {
		t.Errorf("third failure on one node: %s, avoid %v", a, Avoid(r))
	}
	// On another node the count starts again.
	if r = Failed(r, "n2", t0.Add(80*time.Second)); r.Failures != 1 || r.Node != "n2" {
		t.Errorf("failure on another node: %+v", r)
	}
}

func TestGuard(t *testing.T) {
	down := func(name string, ago time.Duration) Node {
		return Node{Name: name, Down: true, DownSince: t0.Add(-ago)}
	}
	up := func(name string) Node { return Node{Name: name} }
	for _, tc := range []struct {
		name    string
		nodes   []Node
		suspect bool
		down    int
	}{
		{"all up", []Node{up("a"), up("b"), up("c")}, false, 0},
		{"one of three", []Node{down("a", time.Minute), up("b"), up("c")}, false, 1},
		{"two of three at once", []Node{down("a", time.Minute), down("b", 50*time.Second), up("c")}, true, 2},
		{"half is not more than half", []Node{down("a", time.Minute), down("b", time.Minute), up("c"), up("d")}, false, 2},
		{"three of four", []Node{down("a", time.Minute), down("b", 2*time.Minute), down("c", 3*time.Minute), up("d")}, true, 3},
		{"two of three far apart", []Node{down("a", time.Hour), down("b", time.Minute), up("c")}, false, 1},
		{"no nodes", nil, false, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := Guard(tc.nodes, 5*time.Minute)
			if p.Suspected != tc.suspect || p.Down != tc.down || p.Total != len(tc.nodes) {
				t.Errorf("Guard = %+v, want suspected %v with %d down", p, tc.suspect, tc.down)
			}
			if tc.suspect && !strings.HasPrefix(p.String(), "partition suspected: ") {
				t.Errorf("words: %s", p)
			}
		})
	}
}

func TestJudge(t *testing.T) {
	n := Node{Name: "n1", Down: true, DownSince: t0}
	calm, cut := Partition{Total: 3, Down: 1}, Partition{Suspected: true, Total: 3, Down: 2, Since: t0}
	for _, tc := range []struct {
		name         string
		node         Node
		replaceAfter time.Duration
		p            Partition
		at           time.Duration
		want         Verdict
		words        string
	}{
		{"node up", Node{Name: "n1"}, time.Minute, calm, time.Hour, Keep, ""},
		{"down, not long enough", n, time.Minute, calm, 59 * time.Second, Waiting, "replaced elsewhere at 2026-11-26T06:01:00Z"},
		{"down long enough", n, time.Minute, calm, time.Minute, Replace, ""},
		{"never moves", n, 0, calm, time.Hour, Waiting, "replace_after is never"},
		{"partition", n, time.Minute, cut, time.Hour, Waiting, "partition suspected: 2/3 nodes Down"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Judge(tc.node, tc.replaceAfter, tc.p, t0.Add(tc.at)); got != tc.want {
				t.Errorf("Judge = %d, want %d", got, tc.want)
			}
			if tc.words != "" {
				if w := WaitingMessage(tc.node, tc.replaceAfter, tc.p); !strings.Contains(w, tc.words) {
					t.Errorf("words %q lack %q", w, tc.words)
				}
			}
		})
	}
}
