package main

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/unyo-ops/unyo/core/api/unyov1"
)

func TestExpandFiles(t *testing.T) {
	dir := t.TempDir()
	for _, f := range []string{"b.yaml", "a.yml", "c.json", "notes.txt", "sub/d.yaml", "empty/x.txt"} {
		p := filepath.Join(dir, f)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	rel := func(ps []string) string {
		var out []string
		for _, p := range ps {
			r, _ := filepath.Rel(dir, p)
			out = append(out, r)
		}
		return strings.Join(out, " ")
	}
	for _, tc := range []struct {
		args      []string
		recursive bool
		want      string
	}{
		{[]string{dir}, false, "a.yml b.yaml c.json"},
		{[]string{dir}, true, "a.yml b.yaml c.json sub/d.yaml"},
		{[]string{filepath.Join(dir, "notes.txt"), dir + "/sub"}, false, "notes.txt sub/d.yaml"},
		{[]string{dir + "/empty"}, false, "error: no .yaml, .yml, .json files (-R reads its subdirectories too)"},
	} {
		got, err := expandFiles(tc.args, tc.recursive)
		s := rel(got)
		if err != nil {
			s = "error: " + strings.TrimPrefix(err.Error(), dir+"/empty: ")
		}
		if s != tc.want {
			t.Errorf("expandFiles(%v, %v) = %s, want %s", tc.args, tc.recursive, s, tc.want)
		}
	}
	if got, _ := expandFiles([]string{"-"}, false); !slices.Equal(got, []string{"-"}) {
		t.Errorf("standard input: %v", got)
	}
}

func TestNotFound(t *testing.T) {
	ref := func(name, cluster string) *unyov1.ObjectRef {
		return &unyov1.ObjectRef{Kind: "Check", Name: name, Cluster: cluster}
	}
	res := func(name, cluster, action string) *unyov1.ApplyResult {
		return &unyov1.ApplyResult{Ref: ref(name, cluster), Action: action}
	}
	got := notFound([]*unyov1.ObjectRef{ref("disk", ""), ref("load", ""), ref("gone", "")}, []*unyov1.ApplyResult{
		res("disk", "", "deleted"), res("disk", "c1", "not found"), // root had it
		res("load", "c1", "not found"), res("load", "c2", "deleted"), // one cluster had it
		res("gone", "c1", "not found"), res("gone", "c2", "not found"),
	})
	if !slices.Equal(got, []string{"Check/gone"}) {
		t.Errorf("notFound = %v, want [Check/gone]", got)
	}
}

// TestWatchIntoPipe: alerts watch writes no terminal control codes into a
// pipe or a buffer.
func TestWatchIntoPipe(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	if isTerminal(w) || isTerminal(&bytes.Buffer{}) {
		t.Error("a pipe or a buffer taken for a terminal")
	}
}

// TestSelectWhere: -l on nodes sees the topology labels over the agent's,
// on alerts their fields, on objects their top-level labels.
func TestSelectWhere(t *testing.T) {
	nodes := []*unyov1.Node{
		{Name: "a", Labels: map[string]string{"role": "web", "topology.unyo.dev/rack": "r9"}, TopologyLabels: map[string]string{"topology.unyo.dev/rack": "r1"}},
		{Name: "b", Labels: map[string]string{"role": "db"}},
	}
	got, err := selectWhere("topology.unyo.dev/rack=r1", nodes, nodeLabels)
	if err != nil || len(got) != 1 || got[0].GetName() != "a" {
		t.Errorf("nodes by topology label: %v, %v", got, err)
	}
	if got, _ := selectWhere("", nodes, nodeLabels); len(got) != 2 {
		t.Errorf("no selector kept %d of 2 nodes", len(got))
	}
	alerts := []*unyov1.Alert{{Id: "1", Node: "a", State: unyov1.AlertState_ALERT_STATE_OPEN, Level: unyov1.AlertLevel_ALERT_LEVEL_CRITICAL},
		{Id: "2", Node: "b", State: unyov1.AlertState_ALERT_STATE_CLOSED}}
	if got, _ := selectWhere("state in (open,acknowledged),level=critical", alerts, alertLabels); len(got) != 1 || got[0].GetId() != "1" {
		t.Errorf("alerts by state and level: %v", got)
	}
	objs := []*unyov1.Object{
		{Kind: &unyov1.Object_Check{Check: &unyov1.Check{Name: "x", Labels: map[string]string{"team": "web"}}}},
		{Kind: &unyov1.Object_Check{Check: &unyov1.Check{Name: "y"}}},
	}
	if got, _ := selectWhere("!team", objs, objectLabels); len(got) != 1 || got[0].GetCheck().GetName() != "y" {
		t.Errorf("objects without team: %v", got)
	}
	if _, err := selectWhere("a in b", objs, objectLabels); err == nil {
		t.Error("a bad selector is accepted")
	}
}
