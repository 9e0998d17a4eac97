package service

import (
	"reflect"
	"testing"
	"time"

	"github.com/unyo-ops/unyo/core/api/unyov1"
)

func TestRevise(t *testing.T) {
	t0 := time.Date(2026, 11, 26, 6, 0, 0, 0, time.UTC)
	spec := &unyov1.ComputeSpec{Flavor: "small", Image: "img", Provider: "exec", Command: []string{"sleep", "1"}, Replicas: 3}
	h, rev := Revise(nil, spec, t0)
	if rev != 1 || len(h) != 1 || h[0].GetTemplate().GetReplicas() != 0 {
		t.Fatalf("first revision: %d %v", rev, h)
	}
	// Replicas, autoscale, policy and update strategy are no new revision.
	same := &unyov1.ComputeSpec{Flavor: "small", Image: "img", Provider: "exec", Command: []string{"sleep", "1"}, Replicas: 5,
		Update: &unyov1.UpdateStrategy{MaxSurge: 2}, ReplaceAfter: "1m", Autoscale: &unyov1.Autoscale{Max: 3}}
	if h2, rev := Revise(h, same, t0); rev != 1 || len(h2) != 1 {
		t.Errorf("a scale made revision %d", rev)
	}
	for i, change := range []func(c *unyov1.ComputeSpec){
		func(c *unyov1.ComputeSpec) { c.Image = "img2" },
		func(c *unyov1.ComputeSpec) { c.Flavor = "large" },
		func(c *unyov1.ComputeSpec) { c.Command = []string{"sleep", "2"} },
		func(c *unyov1.ComputeSpec) { c.Env = map[string]string{"A": "1"} },
		func(c *unyov1.ComputeSpec) { c.Network = "n" },
	} {
		c := WithTemplate(spec, spec)
		change(c)
		if _, rev := Revise(h, c, t0); rev != 2 {
			t.Errorf("change %d: revision %d, want 2", i, rev)
		}
	}
	// At most MaxRevisionHistory are kept.
	for i := range 15 {
		c := WithTemplate(spec, spec)
		c.Env = map[string]string{"I": string(rune('a' + i))}
		h, rev = Revise(h, c, t0)
	}
	if len(h) != MaxRevisionHistory || rev != 16 || h[0].GetRevision() != 7 || Revision(h, 6) != nil || Revision(h, 7) == nil {
		t.Errorf("history of %d, revision %d, oldest %d", len(h), rev, h[0].GetRevision())
	}
}

func TestBudget(t *testing.T) {
	for _, tc := range []struct {
		u                      *unyov1.UpdateStrategy
		replicas, wantU, wantS int
	}{
		{nil, 4, 1, 1}, {nil, 3, 0, 1}, {nil, 10, 2, 3}, {nil, 1, 0, 1}, {nil, 0, 0, 1},
		{&unyov1.UpdateStrategy{MaxUnavailable: 1}, 3, 1, 0},
		{&unyov1.UpdateStrategy{MaxSurge: 2}, 3, 0, 2},
	} {
		if u, s := Budget(tc.u, tc.replicas); u != tc.wantU || s != tc.wantS {
			t.Errorf("Budget(%v, %d) = %d, %d; want %d, %d", tc.u, tc.replicas, u, s, tc.wantU, tc.wantS)
		}
	}
}

func TestPace(t *testing.T) {
	r := func(name string, rev int64, ready, surge bool) RolloutReplica {
		return RolloutReplica{Name: name, Revision: rev, Ready: ready, Surge: surge}
	}
	for _, tc := range []struct {
		name     string
		replicas []RolloutReplica
		mu, ms   int
		want     []Move
	}{
		{"nothing to do", []RolloutReplica{r("a", 2, true, false), r("b", 2, true, false)}, 1, 0, nil},
		{"one at a time", []RolloutReplica{r("a", 1, true, false), r("b", 1, true, false), r("c", 1, true, false)}, 1, 0,
			[]Move{{Name: "a"}}},
		{"waits for the moved one", []RolloutReplica{r("a", 2, false, false), r("b", 1, true, false), r("c", 1, true, false)}, 1, 0, nil},
		{"next once it is Active", []RolloutReplica{r("a", 2, true, false), r("b", 1, true, false), r("c", 1, true, false)}, 1, 0,
			[]Move{{Name: "b"}}},
		{"an unready old replica moves free, first", []RolloutReplica{r("a", 1, true, false), r("b", 1, false, false), r("c", 1, true, false)}, 1, 0,
			[]Move{{Name: "b"}}},
		{"two unavailable", []RolloutReplica{r("a", 1, true, false), r("b", 1, true, false), r("c", 1, true, false)}, 2, 0,
			[]Move{{Name: "a"}, {Name: "b"}}},
		{"surge", []RolloutReplica{r("a", 1, true, false), r("b", 1, true, false), r("c", 1, true, false)}, 0, 1,
			[]Move{{Name: "a", Surge: true}}},
		{"surge in flight", []RolloutReplica{r("a", 2, false, true), r("b", 1, true, false)}, 0, 1, nil},
		// Old replicas whose update checks fail (not Ready, but Active)
		// still serve: they move one at a time, not all at once as if
		// they cost no availability (CI saw all three moved while the
		// first one's checks were still pending).
		{"old replicas failing checks still count", []RolloutReplica{
			{Name: "a", Revision: 2, Ready: false},
			{Name: "b", Revision: 1, Ready: false, Active: true, Failing: "b: check gate is CRITICAL"},
			{Name: "c", Revision: 1, Ready: false, Active: true, Failing: "c: check gate is CRITICAL"}}, 1, 0, nil},
		{"one old replica failing checks moves as one unavailable", []RolloutReplica{
			{Name: "a", Revision: 1, Ready: false, Active: true, Failing: "a: check gate is CRITICAL"},
			{Name: "b", Revision: 1, Ready: false, Active: true, Failing: "b: check gate is CRITICAL"}}, 1, 0,
			[]Move{{Name: "a"}}},
		{"both", []RolloutReplica{r("a", 1, true, false), r("b", 1, true, false), r("c", 1, true, false), r("d", 1, true, false)}, 1, 1,
			[]Move{{Name: "a"}, {Name: "b", Surge: true}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Pace(tc.replicas, 2, tc.mu, tc.ms); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("Pace = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestRolloutProgress(t *testing.T) {
	p := Rollout([]RolloutReplica{{Name: "a", Revision: 2, Ready: true}, {Name: "b", Revision: 2}, {Name: "c", Revision: 1, Ready: true}}, 2)
	if p.String() != "1/3 replicas updated, 1 being replaced" || !p.Running {
		t.Errorf("progress: %s (running %v)", p, p.Running)
	}
	p = Rollout([]RolloutReplica{{Name: "a", Revision: 2, Ready: true}}, 2)
	if p.String() != "1/1 replicas updated" || p.Running {
		t.Errorf("done: %s (running %v)", p, p.Running)
	}
}
